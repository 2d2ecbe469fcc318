"""EngineGroup: the engine containers (docker.Container on each node's provider), workers first, head last, then
the readiness gate.

Every change to the group replaces every container in this order: head stopped, workers stopped, workers started,
head started. It comes from resource options and labels (docker_container labels force a replacement):
- every restart input (group revision, generation, script digest, image ID, weights digest, API key digest) is a
  label of every container, and each container has delete_before_replace (the new container has the old one's
  name, so the old one must be gone first);
- the head depends on the workers and carries their container IDs as a label (a plain depends_on would not
  replace it: pulumi/pulumi#838), so it is deleted before them and created after them; workers are chained the
  same way among themselves, so a multi-member replacement is one ordered path;
- `stop-<node>` steps, whose triggers are the same restart inputs, stop the head's engine and then every
  worker's before any container is replaced: Pulumi replaces the chained containers one after the other
  (worker 1 removed and created, then worker 2, ..., then the head), so without them a new worker would start
  while an old member still ran.
After each container is created, a `watch` step waits `timeouts.startupGraceSeconds` before the next member starts;
a member that stopped meanwhile (a crash at init) is failed by the readiness gate as every failed start is: named
first, every node's log lines, a failure record, the way back (spark_llm.plan.drift.owner_watch_script). The generation
label (spark_llm.plan.drift) is new whenever a member is gone, exited or restarted by hand: `pulumi preview` announces
the ordered restart and `pulumi up` does it.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from components.commands import NodeCommand, discarding_stdin
from components.memory_admission import admission_steps, admission_tokens
from spark_llm.group.order import stop_order
from spark_llm.plan.container import LABEL_REVISION, ContainerSpec, container_spec, take_ports_script
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import owner_watch_script
from spark_llm.plan.memory import DROP_CACHES_SCRIPT
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.readiness import readiness_spec, spec_text
from spark_llm.plan.start.timeline import TIMELINE_PREFIX, parse_timeline
from spark_llm.plan.supervisor import stop_command as supervisor_stop_command


@dataclass(frozen=True, kw_only=True)
class EngineGroupArgs:
    plan: DeploymentPlan
    """The deployment plan: nodes in rank order, container specs' inputs, group revision."""
    stops: dict[str, str]
    """Each node's step that stops its engine before the group is replaced (spark_llm.plan.steps.build_steps)."""
    providers: dict[str, docker.Provider]
    """Each node's docker provider."""
    connections: dict[str, command.remote.ConnectionArgs]
    """Each node's pulumi-command connection."""
    image_ids: dict[str, pulumi.Input[str]]
    """The image ID each node's container runs."""
    generation: pulumi.Input[str]
    """The group's generation (spark_llm.plan.drift.group_generation): new when a member must be restarted."""
    state_id: pulumi.Input[str] = ""
    """This state's identity (components.state_identity), recorded on each node as its engine's owner."""
    after: list[pulumi.Resource] = field(default_factory=list)
    """Resources every container waits for (scripts, image, weights)."""
    restart_on: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    """Label name -> value: what restarts the whole group when it changes (script, weights, API key digests)."""
    supervised: bool = False
    """The stack has a supervisor (components.supervisor): it is stopped before any member is."""
    observations: dict[str, NodeObservation] | None = None
    """What every node runs now (spark_llm.remote.observe): whether this `up` stops the group; None: not looked at."""
    weights_bytes: pulumi.Input[int | None] = None
    """The weights' size by their source's manifest (components.model_weights), which the memory admission counts."""


def _labels(spec: ContainerSpec, extra: Mapping[str, pulumi.Input[str]]) -> list[docker.ContainerLabelArgs]:
    return [docker.ContainerLabelArgs(label=k, value=v) for k, v in {**spec.labels, **extra}.items()]


def _container(
    name: str,
    spec: ContainerSpec,
    image_id: pulumi.Input[str],
    labels: list[docker.ContainerLabelArgs],
    opts: pulumi.ResourceOptions,
) -> docker.Container:
    rdma = spec.rdma
    return docker.Container(
        name,
        name=spec.name,
        image=image_id,
        # The launch script (mounted read-only) loads the engine env file, logs a start line and execs the engine.
        entrypoints=list(spec.entrypoint),
        command=list(spec.command),
        envs=[f"{k}={v}" for k, v in spec.env.items()],
        # The engines bind the node's own fabric and management addresses (NCCL needs the real interfaces).
        network_mode="host",
        # Tensor-parallel processes share memory through /dev/shm and CUDA IPC: the host's /dev/shm, not docker's
        # 64 MB default (which is also why no shm_size is given).
        ipc_mode="host",
        # A PID 1 that installs no SIGTERM handler (a `bash -c` retry loop, some Python servers) makes `docker stop`
        # wait its whole timeout. Docker's init (tini, with TINI_KILL_PROCESS_GROUP in env) passes SIGTERM to the
        # engine's process group: a member stops in ~0.2 s instead of 10 s and can leave the group cleanly.
        init=True,
        gpus="all" if spec.gpus else None,
        # RoCE needs the verbs devices, and RDMA pins large buffers: no memlock limit and the right to lock memory
        # (only with RDMA: raising memlock needs CAP_SYS_RESOURCE, which a node without RDMA may not grant; the sim's
        # nodes cannot, so its RoCE stack sets spark-llm:network.memlockBytes to their 8 MiB).
        devices=[docker.ContainerDeviceArgs(host_path="/dev/infiniband", container_path="/dev/infiniband")]
        if rdma
        else None,
        capabilities=docker.ContainerCapabilitiesArgs(adds=["IPC_LOCK"]) if rdma else None,
        ulimits=[docker.ContainerUlimitArgs(name="memlock", soft=spec.memlock_bytes, hard=spec.memlock_bytes)]
        if rdma
        else None,
        # Weights, script and env file read-only; the compile/JIT cache survives restarts (no warm-up after a crash).
        volumes=[
            docker.ContainerVolumeArgs(host_path=m.source, container_path=m.target, read_only=m.read_only or None)
            for m in spec.mounts
        ],
        labels=labels,
        # A member that dies stays dead: the group restarts as a whole (spark_llm.plan.drift), never one member alone.
        restart="no",
        must_run=True,
        # Stop gracefully before removal, so the engine can leave the group (docker's init makes it quick).
        destroy_grace_seconds=10,
        opts=opts,
    )


def _watch(
    name: str,
    node: NodePlan,
    connection: command.remote.ConnectionArgs,
    container: docker.Container,
    state_id: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> NodeCommand:
    """Records which state started the container, then watches it for the startup grace; a stop is the gate's to
    report (spark_llm.plan.drift.owner_watch_script)."""
    script = pulumi.Output.all(pulumi.Output.from_input(state_id), container.id).apply(
        lambda ids: owner_watch_script(node, ids[0], ids[1])
    )
    return NodeCommand(name, connection=connection, script=script, triggers=[container.id], opts=opts)


class EngineGroup(pulumi.ComponentResource):
    """Worker containers, then the head container, then a gate that passes when rank 0 generates."""

    container_ids: pulumi.Output[dict]
    start_timeline: pulumi.Output[dict]
    ready: command.local.Command

    def __init__(self, name: str, args: EngineGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:EngineGroup", name, None, opts)
        plan = args.plan
        restart = {"spark-llm.generation": args.generation, **args.restart_on}
        # With an API key the restart inputs carry its file's digest: kept encrypted in state.
        secret = plan.api_config is not None
        triggers = [*restart.values(), *args.image_ids.values(), plan.group_revision]
        # Every member stopped before any is replaced, in the group's stop order (spark_llm.group.order). With a
        # supervisor, it is stopped before them all (it must not restart what `up` replaces), by a step of its own:
        # the members' stop steps keep their script, so enabling it (or upgrading to it) restarts no group.
        # Each node's memory admission (components.memory_admission) before the first stop: a node that cannot fit
        # fails `up` while the old group still serves.
        # A model renamed (other than the first) is this new group on the old one's ports, and Pulumi deletes the
        # old group only after this one started: its engines go first, before the admission counts their memory
        # (scripts/lib/engine_ports.sh). A step of its own, made once with the group (its create in `pulumi
        # preview`, its line in `pulumi up` naming what it removed), so no existing stop step changes.
        taken = [
            NodeCommand(
                f"{name}-take-ports-{node.name}",
                connection=args.connections[node.name],
                script=take_ports_script(plan, node),
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.after)),
            )
            for node in plan.nodes
        ]
        # Whether this `up` stops the group, read from what the members' containers carry (the stop steps' triggers
        # are those very values): every member is then judged again, whatever a failed `up` before left recorded.
        planned = pulumi.Output.all(labels=pulumi.Output.all(**restart), images=pulumi.Output.all(**args.image_ids))
        # A token says whether the group stops, never a value: not a secret where the API key's digest is a label.
        tokens = pulumi.Output.unsecret(
            planned.apply(
                lambda got: admission_tokens(
                    plan, args.observations, {**got["labels"], LABEL_REVISION: plan.group_revision}, got["images"]
                )
            )
        )
        admitted = admission_steps(
            f"{name}-admit",
            plan,
            triggers,
            tokens,
            args.weights_bytes,
            pulumi.ResourceOptions(parent=self, depends_on=[*args.after, *taken]),
        )
        stops: list[NodeCommand] = []
        if args.supervised:
            stops.append(
                NodeCommand(
                    f"{name}-stop-supervisor",
                    connection=args.connections[plan.head.name],
                    script=supervisor_stop_command(),
                    triggers=triggers,
                    secret=secret,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.after, *admitted]),
                )
            )
        for node in stop_order(plan.nodes):
            stops.append(
                NodeCommand(
                    f"{name}-stop-{node.name}",
                    connection=args.connections[node.name],
                    script=args.stops[node.name],
                    triggers=triggers,
                    secret=secret,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.after, *(stops[-1:] or admitted)]),
                )
            )
        stopped = stops[-1]

        def member(node: NodePlan, extra: Mapping[str, pulumi.Input[str]], after: Sequence[pulumi.Resource]):
            spec = container_spec(plan, node)
            if plan.drop_caches:
                # spark-llm:memory.dropCaches: the page cache dropped on the node just before its engine starts.
                after = [
                    *after,
                    NodeCommand(
                        f"{name}-{node.name}-drop-caches",
                        connection=args.connections[node.name],
                        script=DROP_CACHES_SCRIPT,
                        triggers=triggers,
                        secret=secret,
                        opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.after, stopped, *after]),
                    ),
                ]
            container = _container(
                f"{name}-{node.name}",
                spec,
                args.image_ids[node.name],
                _labels(spec, {**restart, **extra}),
                pulumi.ResourceOptions(
                    parent=self,
                    provider=args.providers[node.name],
                    depends_on=[*args.after, stopped, *after],
                    delete_before_replace=True,
                    additional_secret_outputs=["labels"] if secret else None,
                ),
            )
            watch = _watch(
                f"{name}-{node.name}-watch",
                node,
                args.connections[node.name],
                container,
                args.state_id,
                pulumi.ResourceOptions(parent=self, depends_on=[container]),
            )
            return container, watch

        # Created in the group's start order (spark_llm.group.order): the workers chained in rank order, the head last.
        containers: dict[str, docker.Container] = {}
        watches: list[NodeCommand] = []
        for node in plan.workers:
            before = list(containers.values())[-1:]
            extra = {"spark-llm.after": before[0].id} if before else {}
            containers[node.name], watch = member(node, extra, [*before, *watches[-1:]])
            watches.append(watch)
        workers = list(containers.values())
        head_extra: dict[str, pulumi.Input[str]] = {
            "spark-llm.workers": pulumi.Output.all(*[w.id for w in workers]).apply(",".join)
        }
        head, head_watch = member(plan.head, head_extra if workers else {}, [*workers, *watches])
        containers = {plan.head.name: head, **containers}
        self.ready = _readiness_gate(
            f"{name}-ready", plan, head, pulumi.ResourceOptions(parent=self, depends_on=[head_watch])
        )
        self.container_ids = pulumi.Output.all(**{n: c.id for n, c in containers.items()})
        # Seconds per start phase per node, as the gate saw this revision start (kept in state with its stdout).
        self.start_timeline = pulumi.Output.all(self.ready.stderr, self.ready.stdout).apply(
            lambda o: parse_timeline(*o)
        )
        self.register_outputs({"container_ids": self.container_ids, "start_timeline": self.start_timeline})


# The gate's update (a setting changed, nothing started): the last start's timeline line given back on stderr.
KEEP_TIMELINE = (
    "echo 'spark-llm: readiness gate settings recorded (the last start is kept)'; "
    'printf "%s" "${PULUMI_COMMAND_STDERR:-}" >&2; '
    f'printf "%s\\n" "${{PULUMI_COMMAND_STDOUT:-}}" | grep -F {shlex.quote(TIMELINE_PREFIX)} >&2 || true'
)


def _readiness_gate(
    name: str, plan: DeploymentPlan, head: docker.Container, opts: pulumi.ResourceOptions
) -> command.local.Command:
    """Runs here, reads the nodes over ssh (read-only) until rank 0 answers a one-token completion."""
    spec = spec_text(readiness_spec(plan, pulumi.get_stack()))
    return command.local.Command(
        name,
        create=f"{shlex.quote(sys.executable)} -m spark_llm.ops.readiness_gate",
        # It does not read the spec: drained first, or the local shell may exit before all of stdin was written. A
        # new setting starts nothing, and the last start's timeline stays the output: its stderr (an older gate's
        # stdout) given back, or `spark-llm status` lost its last start at an upgrade that changed the gate's spec.
        update=discarding_stdin(KEEP_TIMELINE),
        # Progress (stdout) streams into `pulumi up`; a failure's message (stderr, with every member's log tail)
        # shows once, in the step's error.
        logging=command.local.Logging.STDOUT,
        # The spec carries the API key: over stdin (encrypted in state), never on a command line.
        stdin=pulumi.Output.secret(spec) if plan.api_key else spec,
        triggers=[head.id],
        add_previous_output_in_env=True,
        opts=opts,
    )
