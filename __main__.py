"""spark-llm Pulumi program: load the stack config, look at the nodes, build the cluster, export its outputs."""

import signal

# When an update fails or is cancelled (Ctrl-C), Pulumi's language host stops the program with SIGINT; Python would
# answer with a KeyboardInterrupt traceback of whatever thread it hit, under the real error. The engine holds the
# state, so the program may simply end. First, before the imports that take a second (the providers' SDKs).
signal.signal(signal.SIGINT, signal.SIG_DFL)

import pulumi  # noqa: E402

from components import bootstrap as stack  # noqa: E402
from components.cluster import SparkCluster, SparkClusterArgs, probe_extra  # noqa: E402
from components.router import Router, RouterArgs  # noqa: E402
from spark_llm.plan import deployment as plan  # noqa: E402
from spark_llm.plan import router  # noqa: E402

config = stack.load()
# A rollback's `up` puts back the weights the last good start served (spark_llm.ops.rollback): None otherwise.
deployment = plan.build_plan(config, plan.LAUNCH_TEMPLATE.read_text(), restore_weights=stack.restore_weights())
keys = stack.load_keys(deployment)
# One read-only look at every node per program run (preview too): what drift is judged from.
observations = stack.observe_nodes(deployment, probe_extra(deployment))
# `--target` of part of the engine group is refused; `--replace` of a member restarts the whole group in order.
request = stack.group_request(deployment)
# spark-llm:router: one endpoint on the head in front of the engine (None without one).
routed = router.router_plan(config, [router.engine_worker(deployment)])
cluster = SparkCluster(
    "spark",
    SparkClusterArgs(plan=deployment, keys=keys, observations=observations, replaced=request.replaced, router=routed),
)
# The router starts once the group served (its gate passed), on the head.
endpoint = cluster.endpoint
if routed is not None:
    endpoint = Router(
        "router",
        RouterArgs(plan=routed, head=deployment.head.ssh, keys=keys, api_key=deployment.api_key or ""),
        pulumi.ResourceOptions(depends_on=[cluster]),
    ).endpoint
pulumi.export("endpoint", endpoint)
pulumi.export("model", config.model.name)
pulumi.export("engine", config.engine.kind)
pulumi.export("start_order", deployment.start_order)
pulumi.export("group_revision", cluster.group_revision)
pulumi.export("script_sha256", cluster.script_sha256)
pulumi.export("container_ids", cluster.container_ids)
# Seconds per start phase per node, as the readiness gate saw this revision start (`spark-llm status` shows it).
pulumi.export("start_timeline", cluster.start_timeline)
# Each rank's NCCL transport (`NET/IB <devices>` or `NET/Socket <if>`) at that start, with roceDevices.
pulumi.export("fabric_transport", cluster.fabric_transport)
pulumi.export("image_id", cluster.image_id)
pulumi.export("weights_manifest_digest", cluster.weights_manifest_digest)
# Which state started the engines on the nodes (components.state_identity): `spark-llm status` compares it with
# each node's owner record.
pulumi.export("state_id", cluster.state_id)
