"""SparkStack: the stack's room above its groups, from its one plan (spark_llm.plan.stack).

What exists once per node is made once here and handed to every model's group, as pulumi-eks hands each node group
its cluster's core: the nodes' ssh keys, one read-only probe session a node for every group
(components.bootstrap.observe_nodes), the pulumi-command provider and each node's docker provider. On that core: an
engine group per model (SparkCluster) and the router in front of them, on the head's providers too.

Names and aliases keep what a stack deployed by an earlier version runs: the groups keep their names (the first
model the single form's `spark`, another `spark-<key>`) and the router its own (`router`), each aliased from where
they stood before this room (at the stack's root); the shared providers take the first group's names and are aliased
from under it, so its resources keep their provider; another group's resources move to the shared one, which the
engine asks the provider about (DiffConfig: the same connection, nothing to replace).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_command as command

from components import bootstrap
from components.cluster import SparkCluster, SparkClusterArgs, StackCore, probe_extra
from components.connection import docker_provider
from components.gpu_clock import GpuClockCaps, GpuClockCapsArgs
from components.monitoring import Monitoring, MonitoringArgs
from components.router import Router, RouterArgs
from components.supervisor import COMPONENT_TYPE as SUPERVISOR_TYPE
from components.supervisor import supervisor_container
from spark_llm.config import StackConfig
from spark_llm.plan import gpu_clock
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.monitoring.prometheus import disk_probe, monitoring_plan, retention_refusal
from spark_llm.plan.nodes import NodePlan
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.stack import StackPlan

# Where the groups and the router stood before the stack had a room of its own (spark-llm up to 1530184): at the
# stack's root. Their children follow their aliases (the engine derives a child's from its parent's).
AT_THE_ROOT = pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)
FIRST_GROUP = "spark"
CLUSTER_TYPE = "spark-llm:components:SparkCluster"


@dataclass(frozen=True, kw_only=True)
class SparkStackArgs:
    config: StackConfig
    """The parsed stack: what is said of it as a whole (the models' fit)."""
    plan: StackPlan
    """What the stack deploys: its hosts, each model's group plan, the router (spark_llm.plan.stack.build_stack)."""


class SparkStack(pulumi.ComponentResource):
    """Every model's engine group on the stack's nodes, and the router in front of them."""

    outputs: dict[str, object]
    """The stack's outputs by name: one model's at the top level, several under `models.<name>`; the endpoint."""

    def __init__(self, name: str, args: SparkStackArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:SparkStack", name, None, opts)
        stack = args.plan
        keys = bootstrap.load_keys(stack)
        # One read-only look at every node per program run (preview too): what drift is judged from, for every group.
        observations = bootstrap.observe_nodes(stack, _extras(stack))
        # Each node once: the first group's reading, whose probe carries the stack's sections (`_extras`).
        every = bootstrap.each_node(observations) if observations[0] is not None else None
        if every is not None and (refused := _refusals(stack, every)):
            # Every value the nodes refuse at once, before anything runs: one edit, not one per preview.
            bootstrap.refuse("\n".join(refused) + "\nNothing was run on any node.")
        caps = gpu_clock.caps(stack.config.nodes)
        if stack.several:
            # Whether the models fit together on each node, with what the nodes report: before any resource is declared.
            bootstrap.place_models(args.config, list(zip(stack.groups, observations, strict=True)))
        core = self._core(stack)
        clusters: dict[str, SparkCluster] = {}
        for plan, observed in zip(stack.groups, observations, strict=True):
            # `--target` of part of the engine group is refused; `--replace` of a member restarts the whole group.
            request = bootstrap.group_request(plan)
            clusters[plan.model_name] = SparkCluster(
                group_name(plan),
                SparkClusterArgs(
                    plan=plan,
                    core=core,
                    keys=keys,
                    observations=observed,
                    replaced=request.replaced,
                    outputs_under_models=stack.several,
                    # The stack's supervisor keeps the router up: it is in the first model's spec.
                    router=stack.router if not clusters else None,
                ),
                pulumi.ResourceOptions(parent=self, aliases=[AT_THE_ROOT]),
            )
        parts = [cluster.supervisor for cluster in clusters.values() if cluster.supervisor is not None]
        if parts:
            # One supervisor for the stack: one container on the head watching every group, after they all served.
            supervisor_container(
                parts,
                list(stack.groups),
                core.docker[stack.first.head.name],
                core.commands,
                pulumi.ResourceOptions(parent=self, aliases=self._first_supervisors()),
            )
        if caps:
            # Beside the groups, as the heat they bound: no engine waits for a cap, and a cap needs no restart.
            GpuClockCaps(
                "gpu-clock",
                GpuClockCapsArgs(caps=caps, hosts=stack.hosts, keys=keys, commands=core.commands, observations=every),
                pulumi.ResourceOptions(parent=self),
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
                    commands=core.commands,
                    docker=core.docker[stack.first.head.name],
                ),
                pulumi.ResourceOptions(parent=self, depends_on=list(clusters.values()), aliases=[AT_THE_ROOT]),
            )
            # With a router, the stack's one endpoint is the router's, once it lists every model.
            endpoint = {"endpoint": gateway.endpoint}
        watched = monitoring_plan(stack, f" --stack {pulumi.get_stack()}", pulumi.get_stack())
        if watched is not None:
            # Beside the groups: no engine waits for it, and it waits for none (it scrapes what answers).
            watch = Monitoring(
                "monitoring",
                MonitoringArgs(
                    plan=watched,
                    hosts={node.name: node.ssh for node in stack.nodes},
                    keys=keys,
                    password=args.config.monitoring_password or "",
                    webhook=args.config.monitoring_webhook or "",
                    commands=core.commands,
                    docker=core.docker,
                ),
                pulumi.ResourceOptions(parent=self),
            )
            endpoint["monitoring"] = watch.endpoint
        if not stack.several:
            # The stack's one model: its outputs at the top level, as every version before several models wrote them.
            first = clusters[stack.first.model_name]
            self.outputs = {**outputs(stack.first, first), **endpoint}
        else:
            # Each model's outputs under its name (the API's `model`).
            by_model = {name: outputs(stack.models[name], cluster) for name, cluster in clusters.items()}
            self.outputs = {"models": by_model, **endpoint}
        self.register_outputs(self.outputs)

    def _core(self, stack: StackPlan) -> StackCore:
        """The providers every group uses, made once: named as the first group's were, and aliased from under it."""
        # Explicit providers only (Pulumi.yaml sets pulumi:disable-default-providers for command and docker).
        first = pulumi.create_urn(FIRST_GROUP, CLUSTER_TYPE)
        under_first = pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(parent=first)])
        commands = command.Provider(f"{FIRST_GROUP}-command", opts=under_first)
        # One docker provider per node: nothing here ever talks to the operator's own Docker engine.
        docker = {
            node.name: docker_provider(f"{FIRST_GROUP}-docker-{node.name}", node.ssh, under_first)
            for node in stack.nodes
        }
        return StackCore(commands=commands, docker=docker)

    def _first_supervisors(self) -> list[pulumi.Alias]:
        """Where the supervisor's container stood: under the first group's Supervisor, with that group under this
        stack (one model, up to this version) or at the stack's root (up to 1530184)."""
        under = [
            pulumi.create_urn(FIRST_GROUP, CLUSTER_TYPE, parent=self),
            pulumi.create_urn(FIRST_GROUP, CLUSTER_TYPE),
        ]
        return [
            pulumi.Alias(parent=pulumi.create_urn(f"{FIRST_GROUP}-supervisor", SUPERVISOR_TYPE, parent=group))
            for group in under
        ]


def _extras(stack: StackPlan) -> list[Callable[[NodePlan], str]]:
    """Each group's more read-only probe sections for a node: its own (probe_extra), and on the first group that
    runs on a node what the stack asks of that node: the head's disk under Docker's data root with monitoring on (a
    retention larger than it is refused before anything runs), a capped node's clock and its records."""
    caps = gpu_clock.caps(stack.config.nodes)
    head = stack.first.head.name
    firsts: dict[str, int] = {}
    for index, plan in enumerate(stack.groups):
        for node in plan.nodes:
            firsts.setdefault(node.name, index)

    def stack_part(node: NodePlan) -> str:
        part = disk_probe() if node.name == head and stack.config.monitoring is not None else ""
        return part + (gpu_clock.probe(node.ssh.user) if node.name in caps else "")

    def extra(index: int, plan: DeploymentPlan) -> Callable[[NodePlan], str]:
        own = probe_extra(plan)
        return lambda node: own(node) + (stack_part(node) if firsts[node.name] == index else "")

    return [extra(index, plan) for index, plan in enumerate(stack.groups)]


def _refusals(stack: StackPlan, every: dict[str, NodeObservation]) -> list[str]:
    """What the stack asks that its nodes cannot give, as the probe read them: a retention larger than the head's
    disk, a GPU clock cap outside a node's range."""
    found = []
    if stack.config.monitoring is not None:
        if refusal := retention_refusal(stack.config.monitoring, every[stack.first.head.name].facts):
            found.append(refusal)
    return found + gpu_clock.refusals(stack.config.nodes, every)


def group_name(plan: DeploymentPlan) -> str:
    """A group's component name: the first model keeps the single form's (`spark`), another carries its key."""
    return FIRST_GROUP if plan.unit is None else f"{FIRST_GROUP}-{plan.unit}"


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
