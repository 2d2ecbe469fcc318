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
# One engine group per model (a stack of one model: today's names, outputs and resources).
groups = []
for model, model_config in config.per_model():
    # A rollback's `up` puts back the weights the last good start served (spark_llm.ops.rollback): None otherwise.
    deployment = plan.build_plan(
        model_config,
        plan.LAUNCH_TEMPLATE.read_text(),
        restore_weights=stack.restore_weights(model.name),
        unit=model.key,
    )
    keys = stack.load_keys(deployment)
    # One read-only look at every node per program run (preview too): what drift is judged from.
    observations = stack.observe_nodes(deployment, probe_extra(deployment))
    groups.append((model, deployment, keys, observations))
if config.several():
    # Whether the models fit together on each node, with what the nodes report: before any resource is declared.
    stack.place_models(config, [(deployment, observations) for _, deployment, _, observations in groups])
# spark-llm:router: one endpoint on the head in front of every model's engine (None without one).
routed = router.router_plan(config, [router.engine_worker(deployment) for _, deployment, _, _ in groups])
clusters: dict[str, tuple[plan.DeploymentPlan, SparkCluster]] = {}
for model, deployment, keys, observations in groups:
    # `--target` of part of the engine group is refused; `--replace` of a member restarts the whole group in order.
    request = stack.group_request(deployment)
    cluster = SparkCluster(
        "spark" if model.key is None else f"spark-{model.key}",
        SparkClusterArgs(
            plan=deployment,
            keys=keys,
            observations=observations,
            replaced=request.replaced,
            outputs_under_models=config.several(),
            # One supervisor keeps the router up: the first model's (every group has one on the head).
            router=routed if not clusters else None,
        ),
    )
    clusters[model.name] = (deployment, cluster)
# The router starts once every group served (its gate passed), on the head.
gateway = None
if routed is not None:
    first, first_keys = groups[0][1], groups[0][2]
    gateway = Router(
        "router",
        RouterArgs(
            plan=routed,
            head=first.head.ssh,
            keys=first_keys,
            api_key=first.api_key or "",
            state_id=next(iter(clusters.values()))[1].state_id,
        ),
        pulumi.ResourceOptions(depends_on=[cluster for _, cluster in clusters.values()]),
    )


def outputs(deployment: plan.DeploymentPlan, cluster: SparkCluster) -> dict[str, object]:
    """One model's outputs: what `spark-llm status`, `restart` and `rollback` read of its group."""
    return {
        "endpoint": cluster.endpoint,
        "model": deployment.model_name,
        "engine": deployment.engine,
        "start_order": deployment.start_order,
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


# With a router, the stack's one endpoint is the router's, once it lists every model.
endpoint = {"endpoint": gateway.endpoint} if gateway is not None else {}
if not config.several():
    # The stack's one model: its outputs at the top level, as every version before several models wrote them.
    [(only, group)] = clusters.values()
    for key, value in {**outputs(only, group), **endpoint}.items():
        pulumi.export(key, value)
else:
    # Each model's outputs under its name (the API's `model`).
    pulumi.export("models", {name: outputs(*pair) for name, pair in clusters.items()})
    for key, value in endpoint.items():
        pulumi.export(key, value)
