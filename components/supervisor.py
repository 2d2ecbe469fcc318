"""Supervisor: the stack's supervisor on the head (spark-llm:supervisor, on unless `enabled: false`).

Per group (`Supervisor`, a child of the group's SparkCluster):

- `{name}-files`: the program (scripts/supervisor.py), its spec (the members with the container IDs this `up`
  created, the budget) and the workers' pinned host keys, in a 0700 dir on the head (spark_llm.plan.supervisor);
  replaced with the group (the spec names its containers); its delete removes them.
- `{name}-state`: the state dir (the program's state.json), kept while the supervisor is configured; the program
  itself starts a new state for a new deployment.
- `{name}-key` (with workers): the supervisor's own ssh key pair, made on the head (spark_llm.plan.supervisor_key:
  the private key stays there, 0600; the step's stdout is the public line). A resource of this state (its id is a
  trigger): a new state, or the supervisor turned off and on again, makes a new key; its delete removes the pair.
- `{name}-authorize-{worker}`: on each worker, through the head, scripts/supervisor_allow.sh and the key's
  authorized_keys line that lets it run only that script (docker inspect/start/stop/logs on the engine's
  container); its delete removes that line only, and the script.
- `{name}-image-check`: proves on the head that the image has python3 and an ssh client (re-run when the image
  changes). The engine group's steps wait for it (`image_check`, declared before the group): an image that cannot
  supervise fails `pulumi up` before anything is stopped.
Everything of a group is declared in the constructor, which runs before the group is declared (the group waits for
the image check): what it needs of the group (the members' container IDs, the gate) arrives as deferred outputs that
the cluster resolves once the group is declared (pulumi.deferred_output), and carries the group's resources with it.

Once for the stack (`supervisor_container`, a child of the SparkStack): `spark-supervisor`, a docker.Container on the
head's provider running scripts/supervisor.py with every group's spec (one watch each, each its own budget and
state, the router kept beside them), `restart: unless-stopped` (it comes back with the head's Docker engine after a
reboot), created only after every group's readiness gate passed (it supervises groups that served) and replaced
whenever a group's files are (its label is their digest: a new group, a new program). It keeps the first group's
name, and is aliased from under that group's Supervisor (where one-model stacks, and each model's own supervisor
before the stack had one, stood): another model's own supervisor container goes with the upgrade.
The step that stops it before `pulumi up` stops or replaces any member is the engine group's
(components.engine_group, `stop-supervisor`): a separate step, so the members' stop steps keep their script and
an upgrade to this version restarts no group.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from components.commands import NodeCommand
from components.drift_notes import noted_step_token
from spark_llm.plan import supervisor, supervisor_key
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.router import RouterPlan

# The container's resource name: the first group's supervisor's, where a one-model stack has always had it.
CONTAINER_RESOURCE = "spark-supervisor"
COMPONENT_TYPE = "spark-llm:components:Supervisor"


@dataclass(frozen=True, kw_only=True)
class SupervisorArgs:
    plan: DeploymentPlan
    """The deployment plan: the members, the budget (spark-llm:supervisor)."""
    connections: dict[str, command.remote.ConnectionArgs]
    """pulumi-command's connection to each node, by node name (the head's, and each worker's through the head)."""
    state_id: pulumi.Input[str]
    """This state's id (components.state_identity): the supervisor's key is this state's."""
    provider: docker.Provider
    """The head's docker provider."""
    image_id: pulumi.Input[str]
    """The engine image's ID on the head (the supervisor's image unless spark-llm:supervisor.image names another)."""
    container_ids: pulumi.Input[dict]
    """Each member's engine container as this `up` leaves them (deferred: resolved once the group is declared)."""
    ready: pulumi.Input[pulumi.Resource]
    """The readiness gate (deferred likewise): the files and container come once the group served."""
    observations: dict[str, NodeObservation] | None = None
    """What every node runs now (the head's supervisor container, each worker's key line); None: not looked at (unit
    tests)."""
    router: RouterPlan | None = None
    """spark-llm:router's plan: the supervisor keeps the router up too (spark_llm.group.router)."""


class Supervisor(pulumi.ComponentResource):
    """One group's part of the stack's supervisor: the image and its check, its files, state dir and key."""

    image_check: NodeCommand
    image: pulumi.Input[str]
    """What the container runs (the first group's is the stack's)."""
    label: pulumi.Output[str]
    """This group's part of the container's label: its files and key (`supervisor_container`)."""
    needs: list[pulumi.Input[pulumi.Resource]]
    """What the container waits for of this group: its files, state dir, key lines, image check and gate."""
    state_id: pulumi.Input[str]
    """This state's id: the container's owner label (supervisor.LABEL_OWNER)."""
    head: command.remote.ConnectionArgs
    """The head's connection (the container's `-clear` step)."""
    observed: str | None
    """The head's supervisor container as this run found it (`STATUS LABEL`, `absent`; None: not read)."""
    run: str

    def __init__(self, name: str, args: SupervisorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:Supervisor", name, None, opts)
        plan = args.plan
        head = args.connections[plan.head.name]
        image: pulumi.Input[str] = args.image_id
        custom = plan.supervisor.image if plan.supervisor else None
        if custom:
            image = docker.RemoteImage(
                f"{name}-image",
                name=custom,
                keep_locally=True,
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider),
            ).image_id
        self.image_check = NodeCommand(
            f"{name}-image-check",
            connection=head,
            script=pulumi.Output.from_input(image).apply(lambda ref: supervisor.image_check_script(plan, ref)),
            opts=pulumi.ResourceOptions(parent=self),
        )
        after = [args.ready]
        spec_text = pulumi.Output.from_input(args.container_ids).apply(
            lambda ids: supervisor.spec_json(plan, ids, args.router, pulumi.get_stack())
        )
        program = supervisor.program_files()
        files_script = spec_text.apply(lambda text: supervisor.files_script(plan, text, program))
        files = NodeCommand(
            f"{name}-files",
            connection=head,
            script=files_script,
            delete=supervisor.remove_files_command(plan),
            # The old files' delete runs before the new ones are written: same paths.
            opts=pulumi.ResourceOptions(parent=self, depends_on=after, delete_before_replace=True),
        )
        state = NodeCommand(
            f"{name}-state",
            connection=head,
            script=supervisor.state_dir_script(plan),
            delete=supervisor.remove_state_command(plan),
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        # Its own ssh key for the workers, allowed there to run docker inspect/start/stop/logs on the engine only.
        public_key: pulumi.Input[str] = ""
        authorized: list[pulumi.Resource] = []
        if plan.workers:
            key = NodeCommand(
                f"{name}-key",
                connection=head,
                script=supervisor_key.keygen_script(plan, pulumi.get_stack()),
                delete=supervisor_key.remove_key_command(plan),
                # A new key connection (the operator's) must not make a new key: the update prints the public one
                # again, as the step's stdout is what the workers' lines are made of.
                update=supervisor_key.public_key_command(plan),
                # A new state makes a key of its own (two states of one stack never share one).
                triggers=[args.state_id],
                # The old pair's delete runs before the new one is made: same paths.
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
            public_key = key.stdout.apply(lambda out: out.strip())
            for worker in plan.workers:
                # A line or script removed or edited on the worker since: a new token, `up` puts them back.
                there = (args.observations or {}).get(worker.name)
                live = there.facts.get(supervisor_key.PROBE_SECTION) if there is not None else None
                token = noted_step_token(
                    there, supervisor_key.STEP, live, on_drift=partial(supervisor_key.drift_warning, worker)
                )
                authorized.append(
                    NodeCommand(
                        f"{name}-authorize-{worker.name}",
                        connection=args.connections[worker.name],
                        script=pulumi.Output.from_input(public_key).apply(
                            partial(supervisor_key.authorize_script, plan, worker, token=token)
                        ),
                        triggers=[token],
                        # Its delete runs its script again: the key's line (that line only) and the script go.
                        delete_phase=supervisor_key.DELETE_PHASE,
                        # The old line and script go before the new ones are written (same script path).
                        opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
                    )
                )
        seen = (args.observations or {}).get(plan.head.name)
        self.observed = (
            seen.facts.get(supervisor.CONTAINER_SECTION) if seen is not None and seen.error is None else None
        )
        self.run = seen.run if seen is not None else ""
        self.image = image
        self.state_id = args.state_id
        self.head = head
        self.label = pulumi.Output.all(files_script, public_key).apply(lambda parts: "\0".join(filter(None, parts)))
        self.needs = [files, state, self.image_check, *authorized, *after]
        self.register_outputs({})


def supervisor_container(
    parts: list[Supervisor],
    plans: list[DeploymentPlan],
    provider: docker.Provider,
    commands: pulumi.ProviderResource,
    opts: pulumi.ResourceOptions,
) -> docker.Container:
    """The stack's one supervisor container on the head (`parts`: each group's Supervisor, the first group's first;
    `commands`: the stack's pulumi-command provider, for its `-clear` step)."""
    first = parts[0]

    def label(group_parts: list[str]) -> str:
        # One group's label is its files and key, as when each group had a container of its own: a one-model stack's
        # container keeps its label (and so is not replaced) through the upgrade to one supervisor for the stack.
        digest = supervisor.files_digest("\0\0".join(group_parts))
        return supervisor.container_label(digest, first.observed, first.run)

    # One another state made holds the name: it goes first (supervisor.clear_command), each time this one is made.
    clear = NodeCommand(
        f"{CONTAINER_RESOURCE}-clear",
        connection=first.head,
        script=pulumi.Output.from_input(first.state_id).apply(supervisor.clear_command),
        triggers=[pulumi.Output.all(*(part.label for part in parts)).apply(label), first.state_id],
        opts=pulumi.ResourceOptions(parent=first, provider=commands),
    )
    return docker.Container(
        CONTAINER_RESOURCE,
        name=supervisor.CONTAINER_NAME,
        image=first.image,
        entrypoints=list(supervisor.command(plans)),
        # It reaches the head's API on loopback and the workers on their fabric addresses, as the engines do.
        network_mode="host",
        # Docker's init passes `docker stop`'s SIGTERM on at once (the program exits on it).
        init=True,
        volumes=[
            docker.ContainerVolumeArgs(host_path=m.source, container_path=m.target, read_only=m.read_only or None)
            for m in supervisor.stack_mounts(plans)
        ],
        # New files (a new group's spec, a new program) replace the container: it never runs stale ones.
        # A container found gone or stopped gets a new label too (supervisor.container_label): `up` starts it.
        # A new key too: the container mounts the key's dir, which a new key's step makes anew.
        labels=[
            docker.ContainerLabelArgs(
                label=supervisor.LABEL, value=pulumi.Output.all(*(part.label for part in parts)).apply(label)
            ),
            docker.ContainerLabelArgs(label=supervisor.LABEL_OWNER, value=first.state_id),
        ],
        # Back after the head's reboot (its Docker engine starts it); a `docker stop` (pulumi up's first step)
        # keeps it stopped, even across a reboot, until an `up` that succeeded starts a new one.
        restart="unless-stopped",
        must_run=True,
        destroy_grace_seconds=10,
        opts=pulumi.ResourceOptions.merge(
            opts,
            pulumi.ResourceOptions(
                provider=provider,
                depends_on=[clear, *(need for part in parts for need in part.needs)],
                # The new container has the old one's name.
                delete_before_replace=True,
            ),
        ),
    )
