"""EngineImage: the engine's image on every node, the same image ID everywhere, of the expected platform.

Per node, in order (scripts from spark_llm.plan.image.steps):
- `{name}-{node}`: the step. A NodeCommand on the node (platform check; mode present / source head: the image is
  there), or for a worker in mode transfer a NodeCommand on the head that moves the image over the fabric when the
  worker lacks the head's ID; for source operator the head's step is an OperatorCommand on this machine
  (`docker save | ssh head docker load`, when the head lacks that ID).
- `{name}-{node}-image`: a docker.RemoteImage through the node's docker provider: the image ID the node's
  containers use comes from docker itself (mode pull: this is the pull, with `platform`). keep_locally: a replace
  or destroy never removes an image from a node.
- `{name}-{node}-verify`: a NodeCommand on the node: the image is the platform and has the head's ID (on the
  head: its own), with the same error messages as before; it records the node's drift token.
The head's chain runs first; every worker's waits for the head's ID.

Drift: pulumi-command reads nothing back, so every step carries its node's drift token (spark_llm.plan.drift) from
the observation of this program run (spark_llm.remote.observe): a node whose image was removed or changed since the
last `up` gets a new token (preview warns, naming the node) and only that node's chain is replaced.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from functools import partial

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from components.commands import NodeCommand, OperatorCommand
from components.connection import ssh_command, ssh_destination
from components.drift_notes import noted_step_token
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.image import steps as image
from spark_llm.plan.image.steps import ImagePlan
from spark_llm.plan.observation import NodeObservation


@dataclass(frozen=True, kw_only=True)
class EngineImageArgs:
    plan: DeploymentPlan
    """The deployment plan: the nodes in rank order."""
    steps: ImagePlan
    """The image steps, resolved from the config by the plan (spark_llm.plan.steps.build_steps)."""
    connections: dict[str, command.remote.ConnectionArgs]
    """pulumi-command's connection to each node, by node name (components.connection.command_connection)."""
    providers: dict[str, docker.Provider]
    """Each node's docker provider, by node name (components.connection.docker_provider)."""
    observations: dict[str, NodeObservation] | None = None
    """What each node had at this program run (spark_llm.remote.observe); None: not observed (unit tests)."""


def local_image_facts(ref: str) -> str:
    """`ID OS/ARCH` of `ref` in this machine's docker (source operator), or `absent` (the step then says why)."""
    argv = image.local_image_facts_argv(ref)
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pulumi.log.warn(f"`{shlex.join(argv)}` could not run on this machine: {exc}")
        return "absent"
    if out.returncode != 0:
        pulumi.log.warn(f"spark-llm:image.source is operator, but {ref} is not in this machine's docker")
        return "absent"
    return out.stdout.strip()


class EngineImage(pulumi.ComponentResource):
    """Puts the image on every node by the configured mode; `image_ids` is each node's, `image_id` the head's."""

    image_id: pulumi.Output[str]
    image_ids: dict[str, pulumi.Output[str]]
    images: dict[str, docker.RemoteImage]
    verified: dict[str, NodeCommand]

    def __init__(self, name: str, args: EngineImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:EngineImage", name, None, opts)
        steps = args.steps
        nodes = {n.name: n for n in args.plan.nodes}
        self.images, self.verified, self.image_ids = {}, {}, {}
        head_id: pulumi.Output[str] | None = None
        head_verified: list[pulumi.Resource] = []
        for step in steps.steps:
            node = nodes[step.node]
            observation = (args.observations or {}).get(node.name)
            token = noted_step_token(
                observation,
                image.DRIFT_STEP,
                image.live_image_id(observation.image) if observation else None,
                on_first_run=lambda why: f"{why}: `pulumi up` puts image {steps.ref} there",
                on_drift=lambda why: f"drift: {why} (image {steps.ref}); `pulumi up` repairs it",
            )
            child = pulumi.ResourceOptions(parent=self, depends_on=head_verified)
            prepare: pulumi.Resource
            if step.local:
                # What this machine would send: a new image here re-runs the step (preview shows it).
                prepare = OperatorCommand(
                    f"{name}-{node.name}",
                    script=step.script,
                    environment={
                        image.SSH_ENV: "\n".join(ssh_command(node.ssh)),
                        image.SSH_TARGET_ENV: ssh_destination(node.ssh),
                    },
                    triggers=[token, local_image_facts(steps.ref)],
                    opts=child,
                )
            else:
                script: pulumi.Input[str] = step.script
                triggers: list[pulumi.Input[object]] = [token]
                if step.needs_head_id:
                    assert head_id is not None  # the head's step comes first
                    script = head_id.apply(partial(image.with_head_id, step.script))
                    triggers.append(head_id)  # a new image on the head re-runs every worker's transfer
                prepare = NodeCommand(
                    f"{name}-{node.name}",
                    connection=args.connections[step.runs_on.name],
                    script=script,
                    triggers=triggers,
                    opts=child,
                )
            remote = docker.RemoteImage(
                f"{name}-{node.name}-image",
                name=steps.ref,
                keep_locally=True,
                platform=steps.pull_platform,
                # Replaced (read again, pulled again in mode pull) with the step: drift, or a new head image.
                triggers={"token": token, **({"head": head_id} if head_id is not None else {})},
                opts=pulumi.ResourceOptions(
                    parent=self, provider=args.providers[node.name], depends_on=[prepare, *head_verified]
                ),
            )
            own_id = remote.image_id.apply(lambda i: i or "")
            expected = own_id if head_id is None else head_id
            verify = NodeCommand(
                f"{name}-{node.name}-verify",
                connection=args.connections[node.name],
                script=expected.apply(partial(step.verify, token)),
                triggers=[token, own_id],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[remote]),
            )
            self.images[node.name], self.verified[node.name] = remote, verify
            # What the node's containers use, once verified (its verify step passed only with the head's ID).
            self.image_ids[node.name] = pulumi.Output.all(own_id, verify.id).apply(lambda v: v[0])
            if head_id is None:
                head_id, head_verified = self.image_ids[node.name], [verify]
        assert head_id is not None
        self.image_id = head_id
        self.register_outputs({"image_id": self.image_id, "image_ids": self.image_ids})
