"""Supervisor: the group's supervisor on the head (spark-llm:supervisor.enabled), a resource of the stack.

- `{name}-files`: the program (scripts/supervisor.py), its spec (the members with the container IDs this `up`
  created, the budget) and the workers' pinned host keys, in a 0700 dir on the head (spark_llm.plan.supervisor);
  replaced with the group (the spec names its containers); its delete removes them.
- `{name}-state`: the state dir (the program's state.json), kept while the supervisor is configured; the program
  itself starts a new state for a new deployment.
- `{name}-image-check`: proves on the head that the image has python3 and an ssh client (re-run when the image
  changes). The engine group's steps wait for it (`image_check`, declared before the group): an image that cannot
  supervise fails `pulumi up` before anything is stopped.
- `{name}`: a docker.Container on the head's provider, `restart: unless-stopped` (it comes back with the head's
  Docker engine after a reboot), created only after the readiness gate passed (it supervises a group that served)
  and replaced whenever its files are (its label is their digest: a new group, a new program).
Everything is declared in the constructor, which runs before the group is declared (the group waits for the image
check): what it needs of the group (the members' container IDs, the gate) arrives as deferred outputs that the
cluster resolves once the group is declared (pulumi.deferred_output), and carries the group's resources with it.
The step that stops it before `pulumi up` stops or replaces any member is the engine group's
(components.engine_group, `stop-supervisor`): a separate step, so the members' stop steps keep their script and
an upgrade to this version restarts no group.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from components.commands import NodeCommand
from spark_llm.plan import supervisor
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.observation import NodeObservation


@dataclass(frozen=True, kw_only=True)
class SupervisorArgs:
    plan: DeploymentPlan
    """The deployment plan: the members, the budget (spark-llm:supervisor)."""
    connection: command.remote.ConnectionArgs
    """pulumi-command's connection to the head."""
    provider: docker.Provider
    """The head's docker provider."""
    image_id: pulumi.Input[str]
    """The engine image's ID on the head (the supervisor's image unless spark-llm:supervisor.image names another)."""
    container_ids: pulumi.Input[dict]
    """Each member's engine container as this `up` leaves them (deferred: resolved once the group is declared)."""
    ready: pulumi.Input[pulumi.Resource]
    """The readiness gate (deferred likewise): the files and container come once the group served."""
    head_observation: NodeObservation | None = None
    """What the head runs now (its supervisor container's state and label); None: not looked at (unit tests)."""


class Supervisor(pulumi.ComponentResource):
    """The supervisor's image and its check, its files, state dir and container."""

    image_check: NodeCommand
    container_id: pulumi.Output[str]

    def __init__(self, name: str, args: SupervisorArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:Supervisor", name, None, opts)
        plan = args.plan
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
            connection=args.connection,
            script=pulumi.Output.from_input(image).apply(lambda ref: supervisor.image_check_script(plan, ref)),
            opts=pulumi.ResourceOptions(parent=self),
        )
        after = [args.ready]
        spec_text = pulumi.Output.from_input(args.container_ids).apply(lambda ids: supervisor.spec_json(plan, ids))
        program = supervisor.program_files()
        files_script = spec_text.apply(lambda text: supervisor.files_script(plan, text, program))
        files = NodeCommand(
            f"{name}-files",
            connection=args.connection,
            script=files_script,
            delete=supervisor.remove_files_command(plan),
            # The old files' delete runs before the new ones are written: same paths.
            opts=pulumi.ResourceOptions(parent=self, depends_on=after, delete_before_replace=True),
        )
        state = NodeCommand(
            f"{name}-state",
            connection=args.connection,
            script=supervisor.state_dir_script(plan),
            delete=supervisor.remove_state_command(plan),
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        seen = args.head_observation
        observed = seen.facts.get(supervisor.CONTAINER_SECTION) if seen is not None and seen.error is None else None
        run = seen.run if seen is not None else ""

        def label(script: str) -> str:
            return supervisor.container_label(supervisor.files_digest(script), observed, run)

        container = docker.Container(
            name,
            name=supervisor.CONTAINER_NAME,
            image=image,
            entrypoints=list(supervisor.command()),
            # It reaches the head's API on loopback and the workers on their fabric addresses, as the engines do.
            network_mode="host",
            # Docker's init passes `docker stop`'s SIGTERM on at once (the program exits on it).
            init=True,
            volumes=[
                docker.ContainerVolumeArgs(host_path=m.source, container_path=m.target, read_only=m.read_only or None)
                for m in supervisor.mounts(plan)
            ],
            # New files (a new group's spec, a new program) replace the container: it never runs stale ones.
            # A container found gone or stopped gets a new label too (supervisor.container_label): `up` starts it.
            labels=[docker.ContainerLabelArgs(label=supervisor.LABEL, value=files_script.apply(label))],
            # Back after the head's reboot (its Docker engine starts it); a `docker stop` (pulumi up's first step)
            # keeps it stopped, even across a reboot, until an `up` that succeeded starts a new one.
            restart="unless-stopped",
            must_run=True,
            destroy_grace_seconds=10,
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=[files, state, self.image_check, *after],
                # The new container has the old one's name.
                delete_before_replace=True,
            ),
        )
        self.container_id = container.id
        self.register_outputs({"container_id": self.container_id})
