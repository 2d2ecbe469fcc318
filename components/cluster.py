"""SparkCluster: wires LaunchScripts, EngineImage, ModelWeights and EngineGroup from one plan."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from components.bootstrap import under_mocks
from components.connection import command_connection
from components.engine_group import EngineGroup, EngineGroupArgs
from components.engine_image import EngineImage, EngineImageArgs
from components.firewall import Firewall, FirewallArgs
from components.launch_scripts import LaunchScripts, LaunchScriptsArgs
from components.memory_admission import note_memory
from components.memory_admission import probe as memory_probe
from components.model_weights import ModelWeights, ModelWeightsArgs
from components.state_identity import state_identity
from components.supervisor import Supervisor, SupervisorArgs
from spark_llm.group.fabric import fabric_outputs
from spark_llm.group.history import (
    LAST_START_SECTION,
    fabric_fallbacks,
    fallback_sentence,
    last_failure,
    last_start_probe,
)
from spark_llm.plan import drift, firewall, supervisor
from spark_llm.plan.container import LABEL_REVISION
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.host_record import (
    LAST_SERVED_SECTION,
    changes_warning,
    host_changes,
    host_fields,
    host_probe,
    last_served,
    last_served_probe,
)
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.router import RouterPlan
from spark_llm.plan.start.timeline import failed_start_warning
from spark_llm.plan.steps import build_steps
from spark_llm.plan.supervisor_report import SupervisorReport


def probe_extra(plan: DeploymentPlan) -> Callable[[NodePlan], str]:
    """The `extra` probe sections of spark_llm.remote.observe.observe_stack for this plan (the weights' and the launch
    files' live digests: spark_llm.plan.steps)."""
    probes = build_steps(plan).probes
    # On the head, also the latest start of the configured revision (a failed one is warned of: _note_failed_start).
    last_start = last_start_probe(plan.history_path, plan.group_revision)
    # Every node's host now, and on the head the hosts of the last start that served (_note_host_changes).
    hosts = host_probe(plan)
    memory = memory_probe(plan)  # each node's memory: preview's admission warning (components.memory_admission)
    on_head = last_start + last_served_probe(plan.history_path)
    return lambda node: probes[node.name] + hosts + memory + (on_head if node.name == plan.head.name else "")


def _note_host_changes(plan: DeploymentPlan, observations: dict[str, NodeObservation] | None) -> None:
    """`pulumi preview` and `up` name what changed on the hosts since the last start that served (node, field,
    old -> new): the first suspect when a group that served yesterday fails today."""
    head = (observations or {}).get(plan.head.name)
    served = last_served(head.facts.get(LAST_SERVED_SECTION)) if head else None
    if served is None:
        return
    now = {name: host_fields(o.facts) for name, o in (observations or {}).items() if o.reachable}
    changes = host_changes(served.get("hosts", {}), now)
    if changes:
        pulumi.log.warn(changes_warning(changes, served.get("at", "?")))


def _note_fabric(plan: DeploymentPlan, observations: dict[str, NodeObservation] | None) -> None:
    """`pulumi preview` and `up` say what `spark-llm status` says when the configured revision serves off the fabric
    the stack asked for (its latest start, by `up` under fabricProof warn or by the supervisor: the head's history)."""
    head = (observations or {}).get(plan.head.name)
    fallback = fabric_fallbacks(head.facts.get(LAST_START_SECTION), plan.group_revision) if head else None
    if fallback is not None:
        pulumi.log.warn(f"engine group: {fallback_sentence(*fallback)}")


def _note_failed_start(plan: DeploymentPlan, observations: dict[str, NodeObservation] | None) -> None:
    """`pulumi preview` and `up` warn when the configured revision failed to start last time (the head's history of
    starts): after a rollback the nodes run the revision that served before, and the next `up` relaunches it."""
    head = (observations or {}).get(plan.head.name)
    if head is None:
        return
    failure = last_failure(head.facts.get(LAST_START_SECTION), plan.group_revision)
    if failure is not None:
        running = head.engine.labels.get(LABEL_REVISION) if head.engine.running else None
        pulumi.log.warn(failed_start_warning(failure, running))


def _group_generation(
    plan: DeploymentPlan,
    observations: dict[str, NodeObservation] | None,
    state_id: object,
    replaced: tuple[str, ...] = (),
) -> str:
    """The group's generation label (spark_llm.plan.drift), and what preview says of the group.

    `state_id`: this state's id, or pulumi's UNKNOWN in the preview of a state that never deployed.
    """
    own = state_id if isinstance(state_id, str) and state_id else None
    others = drift.engines_of_other_states(observations, own)
    for node in others:
        engine = (observations or {})[node].engine
        pulumi.log.warn(
            f"{node} runs a spark-llm engine that this state did not start (container {engine.container_id[:12]},"
            f" {plan.container}, started {engine.started_at[:19]}, revision"
            f" {engine.labels.get(LABEL_REVISION, '?')}): another checkout's or a lost state's deployment of this"
            " stack. `pulumi up` stops it and starts this state's group in its place."
        )
    generation, why = drift.group_generation(observations, [(n.name, n.role) for n in plan.nodes], others)
    if replaced:
        # A new generation at each such run: every member's stop step and container, in the group's order.
        generation = drift.replaced_generation(generation, replaced, secrets.token_hex(8))
        pulumi.log.info(
            f"engine group: `--replace` of {', '.join(replaced)}: the whole group restarts in order (the supervisor"
            f" stopped first), as `spark-llm restart` does"
        )
        return generation
    seen = list((observations or {}).values())
    if any(o.error for o in seen):
        pass  # components.bootstrap already named each node it could not read
    elif why and seen and all(o.engine.status == "absent" for o in seen):
        pulumi.log.info("engine group: no engine container on any node; `pulumi up` starts the group, workers first")
    elif why and not others:  # (the engines of other states were named above)
        pulumi.log.warn(f"drift in the engine group: {why}; `pulumi up` restarts the whole group in order")
    return generation


def _state_behind_note(
    plan: DeploymentPlan, observations: dict[str, NodeObservation] | None, state_id: object, recorded: object
) -> None:
    own = state_id if isinstance(state_id, str) and state_id else None
    said = drift.state_behind_nodes(
        observations, recorded, plan.group_revision, drift.engines_of_other_states(observations, own)
    )
    if said:
        pulumi.log.warn(said)


def _supervisor_note(plan: DeploymentPlan, observations: dict[str, NodeObservation] | None) -> None:
    """What `pulumi preview`/`up` says of the supervisor's restarts and of its giving up (its state on the head)."""
    head = (observations or {}).get(plan.head.name)
    text = head.facts.get(supervisor.PROBE_SECTION) if head else None
    report = SupervisorReport.parse(text) if text else None
    # The container is the stack's one: the first group says what became of it.
    container = head.facts.get(supervisor.CONTAINER_SECTION) if head and plan.unit is None else None
    for warning in (report.preview_warning() if report else None, supervisor.container_warning(container, text)):
        if warning:
            pulumi.log.warn(warning)


def _firewall_note(plan: DeploymentPlan, observations: dict[str, NodeObservation] | None) -> None:
    """While spark-llm:network.firewall is off: each node whose group ports can be reached beyond the fabric."""
    for node in plan.nodes:
        observation = (observations or {}).get(node.name)
        warning = firewall.exposure_warning(plan, node, observation.facts) if observation else None
        if warning:
            pulumi.log.warn(warning)


@dataclass(frozen=True)
class StackCore:
    """What exists once per node for every group (components.stack): the providers that reach the nodes."""

    commands: command.Provider
    """The pulumi-command provider (each step carries its node's connection)."""
    docker: dict[str, docker.Provider]
    """Each node's docker provider (its engine over ssh, never the operator's own), by node name."""


@dataclass(frozen=True, kw_only=True)
class SparkClusterArgs:
    plan: DeploymentPlan
    """The deployment plan built from the stack config."""
    core: StackCore
    """The stack's providers, made once for every group (components.stack)."""
    keys: dict[str, str]
    """The ssh private keys' contents by path (spark_llm.remote.key_files.read_keys)."""
    observations: dict[str, NodeObservation] | None = None
    """What every node runs now (spark_llm.remote.observe); None: not looked at (unit tests)."""
    replaced: tuple[str, ...] = ()
    """Members whose container this `pulumi up --replace`s (spark_llm.plan.cli_flags): the group restarts in order."""
    outputs_under_models: bool = False
    """The stack lists several models: this group's outputs are under `models.<name>`, not at the top level."""
    router: RouterPlan | None = None
    """spark-llm:router's plan, in this group's supervisor spec: the stack's supervisor keeps it up too (it is in the
    first model's spec; the router itself: components.router)."""


class SparkCluster(pulumi.ComponentResource):
    """One model served by one engine group across the stack's nodes."""

    endpoint: pulumi.Output[str]
    group_revision: pulumi.Output[str]
    script_sha256: pulumi.Output[str]
    container_ids: pulumi.Output[dict]
    start_timeline: pulumi.Output[dict]
    fabric_transport: pulumi.Output[dict]
    image_id: pulumi.Output[str]
    weights_manifest_digest: pulumi.Output[str]
    state_id: pulumi.Output[str]
    supervisor: Supervisor | None
    """This group's part of the stack's supervisor (its container is the stack's: components.supervisor)."""

    def __init__(self, name: str, args: SparkClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:SparkCluster", name, None, opts)
        plan = args.plan
        # The stack's providers (components.stack): every command resource below inherits its command provider, every
        # docker resource names its node's docker provider.
        child = pulumi.ResourceOptions(parent=self, providers={"command": args.core.commands})
        # Every step's script and the values it uses, resolved once from the plan: the children only declare them.
        steps = build_steps(plan)
        connections = {n.name: command_connection(n.ssh, args.keys) for n in plan.nodes}
        providers = {n.name: args.core.docker[n.name] for n in plan.nodes}
        # Which engines this state started: its own id, and each node's owner record (spark_llm.plan.drift).
        identity = state_identity(f"{name}-state", child)
        generation = identity.stdout.apply(
            lambda state_id: _group_generation(plan, args.observations, state_id, args.replaced),
            run_with_unknowns=True,
        )
        if args.observations is not None and not under_mocks():
            # What this state last recorded (its own outputs): said when the nodes are ahead of it.
            stack = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
            # The single form's reference keeps its URN; another model's has one of its own.
            own = (
                pulumi.StackReference(stack, opts=pulumi.ResourceOptions(parent=self))
                if plan.unit is None
                else pulumi.StackReference(f"{name}-recorded", stack, opts=pulumi.ResourceOptions(parent=self))
            )
            recorded = (
                own.get_output("models").apply(
                    lambda models: ((models or {}).get(plan.model_name) or {}).get("container_ids")
                )
                if args.outputs_under_models
                else own.get_output("container_ids")
            )
            pulumi.Output.all(identity.stdout, recorded).apply(
                lambda got: _state_behind_note(plan, args.observations, got[0], got[1]), run_with_unknowns=True
            )
        observed = args.observations
        _note_failed_start(plan, observed)
        _note_fabric(plan, observed)
        _note_host_changes(plan, observed)
        _firewall_note(plan, observed)
        # The table that refuses the group's ports beyond the fabric, before any engine starts (the group waits).
        firewalls = (
            [
                Firewall(
                    f"{name}-firewall",
                    FirewallArgs(plan=plan, rules=steps.firewall, connections=connections, observations=observed),
                    child,
                )
            ]
            if steps.firewall
            else []
        )
        scripts = LaunchScripts(
            f"{name}-scripts",
            LaunchScriptsArgs(plan=plan, files=steps.files, connections=connections, observations=observed),
            child,
        )
        image = EngineImage(
            f"{name}-image",
            EngineImageArgs(
                plan=plan, steps=steps.image, connections=connections, providers=providers, observations=observed
            ),
            child,
        )
        weights = ModelWeights(
            f"{name}-weights",
            ModelWeightsArgs(plan=plan, steps=steps.weights, connections=connections, observations=observed),
            child,
        )
        note_memory(plan, observed, weights.size_now)
        # The supervisor's image is checked before the group's steps run (they wait for the check); its files and
        # container come after the group served: what they need of the group is resolved once it is declared.
        overseer = None
        resolvers: list[Callable[[EngineGroup], None]] = []
        if plan.supervisor is not None:
            _supervisor_note(plan, args.observations)
            container_ids: pulumi.Output[dict]
            ready: pulumi.Output[pulumi.Resource]
            resolve_ids: Callable[[pulumi.Output[dict]], None]
            resolve_ready: Callable[[pulumi.Output[pulumi.Resource]], None]
            container_ids, resolve_ids = pulumi.deferred_output()
            ready, resolve_ready = pulumi.deferred_output()
            resolvers.append(lambda group: resolve_ids(group.container_ids))
            resolvers.append(lambda group: resolve_ready(pulumi.Output.from_input(group.ready)))
            overseer = Supervisor(
                f"{name}-supervisor",
                SupervisorArgs(
                    plan=plan,
                    connections=connections,
                    state_id=identity.stdout,
                    provider=providers[plan.head.name],
                    image_id=image.image_id,
                    container_ids=container_ids,
                    ready=ready,
                    observations=args.observations,
                    router=args.router,
                ),
                child,
            )
        restart_on: dict[str, pulumi.Input[str]] = {
            "spark-llm.script": scripts.script_sha256,
            "spark-llm.weights": weights.manifest_digest,
        }
        if scripts.api_config_digest is not None:
            restart_on["spark-llm.api-key"] = scripts.api_config_digest
        if scripts.ray_token_digest is not None:
            restart_on["spark-llm.ray-token"] = scripts.ray_token_digest
        group = EngineGroup(
            f"{name}-engine",
            EngineGroupArgs(
                plan=plan,
                stops=steps.stops,
                providers=providers,
                connections=connections,
                # The head's ID for every node: each node's verify step (a prerequisite) proved it has that ID, and
                # a worker whose image is put back with the same ID must not show in preview as a group restart
                # (its own RemoteImage's ID is unknown until it is read again).
                image_ids={n.name: image.image_id for n in plan.nodes},
                generation=generation,
                state_id=identity.stdout,
                # Prerequisites of every container.
                after=[scripts, image, weights, *firewalls, *([overseer.image_check] if overseer else [])],
                restart_on=restart_on,
                supervised=plan.supervisor is not None,
                observations=observed,
                weights_bytes=weights.size,
            ),
            child,
        )
        for resolve in resolvers:
            resolve(group)
        self.supervisor = overseer
        self.endpoint = group.ready.stdout.apply(lambda _: plan.endpoint)
        self.group_revision = pulumi.Output.from_input(plan.group_revision)
        self.script_sha256 = scripts.script_sha256
        self.container_ids = group.container_ids
        self.start_timeline = group.start_timeline
        # Each rank's NCCL transport at the last start that served (with roceDevices; else empty).
        self.fabric_transport = group.start_timeline.apply(lambda t: fabric_outputs(t.get("fabric") or {}))
        self.image_id = image.image_id
        self.weights_manifest_digest = weights.manifest_digest
        self.state_id = identity.stdout
        self.register_outputs(
            {
                "endpoint": self.endpoint,
                "group_revision": self.group_revision,
                "script_sha256": self.script_sha256,
                "container_ids": self.container_ids,
                "start_timeline": self.start_timeline,
                "fabric_transport": self.fabric_transport,
                "image_id": self.image_id,
                "weights_manifest_digest": self.weights_manifest_digest,
                "state_id": self.state_id,
            }
        )
