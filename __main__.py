"""spark-llm Pulumi program: load the stack config, build the cluster, export what an operator needs."""

import pulumi

from components.cluster import SparkCluster, SparkClusterArgs, probe_extra
from spark_llm import connection, observe, plan, stack

config = stack.load()
deployment = plan.build_plan(config, plan.TEMPLATE_PATH.read_text())
# The keys first: an unreadable one stops the program before anything reaches a node.
keys = connection.read_keys(config)
# One read-only look at every node per program run (preview too): what the steps' drift tokens are made from.
observations = observe.observe(deployment, probe_extra(deployment))
cluster = SparkCluster("spark", SparkClusterArgs(plan=deployment, observations=observations, keys=keys))

pulumi.export("endpoint", cluster.endpoint)
pulumi.export("model", config.model.name)
pulumi.export("engine", config.engine.kind)
pulumi.export("start_order", deployment.start_order)
pulumi.export("group_revision", cluster.group_revision)
pulumi.export("script_sha256", cluster.script_sha256)
pulumi.export("container_ids", cluster.container_ids)
pulumi.export("image_id", cluster.image_id)
pulumi.export("weights_manifest_digest", cluster.weights_manifest_digest)
