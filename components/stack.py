"""The stack's resources from its one plan (spark_llm.plan.stack): an engine group per model on the nodes read once,
and the router in front of them; and the outputs `spark-llm` reads.

What exists once per node is read once here: the nodes' ssh keys and one read-only probe session a node for every
group (components.bootstrap.observe_nodes). Each model's group keeps the names it has always had (the first model
the single form's, `spark`; another `spark-<key>`), and the router its own (`router`), so that a stack deployed by
an earlier version restarts nothing when this one runs.
"""

from __future__ import annotations

import pulumi

from components import bootstrap
from components.cluster import SparkCluster, SparkClusterArgs, probe_extra
from components.router import Router, RouterArgs
from spark_llm.config import StackConfig
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.stack import StackPlan


def deploy(cfg: StackConfig, stack: StackPlan) -> dict[str, object]:
    """Declare every group and the router; return the stack's outputs by name."""
    keys = bootstrap.load_keys(stack)
    # One read-only look at every node per program run (preview too): what drift is judged from, for every group.
    observations = bootstrap.observe_nodes(stack, [probe_extra(plan) for plan in stack.groups])
    if stack.several:
        # Whether the models fit together on each node, with what the nodes report: before any resource is declared.
        bootstrap.place_models(cfg, list(zip(stack.groups, observations, strict=True)))
    clusters: dict[str, SparkCluster] = {}
    for plan, observed in zip(stack.groups, observations, strict=True):
        # `--target` of part of the engine group is refused; `--replace` of a member restarts the whole group in order.
        request = bootstrap.group_request(plan)
        clusters[plan.model_name] = SparkCluster(
            "spark" if plan.unit is None else f"spark-{plan.unit}",
            SparkClusterArgs(
                plan=plan,
                keys=keys,
                observations=observed,
                replaced=request.replaced,
                outputs_under_models=stack.several,
                # One supervisor keeps the router up: the first model's (every group has one on the head).
                router=stack.router if not clusters else None,
            ),
        )
    endpoint: dict[str, object] = {}
    if stack.router is not None:
        # The router starts once every group served (its gate passed), on the head.
        gateway = Router(
            "router",
            RouterArgs(
                plan=stack.router,
                head=stack.first.head.ssh,
                keys=keys,
                api_key=stack.first.api_key or "",
                state_id=clusters[stack.first.model_name].state_id,
            ),
            pulumi.ResourceOptions(depends_on=list(clusters.values())),
        )
        # With a router, the stack's one endpoint is the router's, once it lists every model.
        endpoint = {"endpoint": gateway.endpoint}
    if not stack.several:
        # The stack's one model: its outputs at the top level, as every version before several models wrote them.
        return {**outputs(stack.first, clusters[stack.first.model_name]), **endpoint}
    # Each model's outputs under its name (the API's `model`).
    return {"models": {name: outputs(stack.models[name], cluster) for name, cluster in clusters.items()}, **endpoint}


def outputs(plan: DeploymentPlan, cluster: SparkCluster) -> dict[str, object]:
    """One model's outputs: what `spark-llm status`, `restart` and `rollback` read of its group."""
    return {
        "endpoint": cluster.endpoint,
        "model": plan.model_name,
        "engine": plan.engine,
        "start_order": plan.start_order,
        "group_revision": cluster.group_revision,
        "script_sha256": cluster.script_sha256,
        "container_ids": cluster.container_ids,
        # Seconds per start phase per node, as the readiness gate saw this revision start (`spark-llm status`).
        "start_timeline": cluster.start_timeline,
        # Each rank's NCCL transport (`NET/IB <devices>` or `NET/Socket <if>`) at that start, with roceDevices.
        "fabric_transport": cluster.fabric_transport,
        "image_id": cluster.image_id,
        "weights_manifest_digest": cluster.weights_manifest_digest,
        # Which state started the engines on the nodes (components.state_identity): `spark-llm status` compares it
        # with each node's owner record.
        "state_id": cluster.state_id,
    }
