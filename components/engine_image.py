"""EngineImage: the engine's image on every node, the same image ID everywhere, of the expected platform.

One RemoteCommand a node (scripts from spark_llm.image): the head's step first, then every worker's step in
parallel, each given the head's image ID and failing, naming its node, unless it ends with that ID. In mode
transfer a worker's step runs on the head and moves the image over the fabric only when the worker lacks it
or has another ID. Each step has a read-only check (`docker image inspect`): a node whose image was removed
or changed since the last `up` shows as drift in `pulumi preview`, and `up` puts the image back.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from spark_llm.image import HEAD_ID_ENV, image_steps, parse_image_id
from spark_llm.plan import DeploymentPlan
from spark_llm.remote import RemoteCommand


@dataclass(frozen=True, kw_only=True)
class EngineImageArgs:
    plan: DeploymentPlan
    """The deployment plan: nodes in rank order and the image config."""


class EngineImage(pulumi.ComponentResource):
    """Puts the image on every node by the configured mode; `image_id` is the ID every node has."""

    image_id: pulumi.Output[str]
    steps: dict[str, RemoteCommand]

    def __init__(self, name: str, args: EngineImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:EngineImage", name, None, opts)
        plan = args.plan
        head_step, *worker_steps = image_steps(plan)
        timeout = float(plan.config.timeouts.transfer_seconds)

        head = RemoteCommand(
            f"{name}-{head_step.node}",
            connection=head_step.runs_on.ssh.to_props(),
            create=head_step.script,
            check=head_step.check,
            feed=head_step.feed,
            label=head_step.node,
            timeout=timeout,
            opts=pulumi.ResourceOptions(parent=self),
        )
        head_id = head.stdout.apply(parse_image_id)
        self.steps = {head_step.node: head}
        for step in worker_steps:
            # The head's ID in the environment: a new image on the head re-runs every worker's step.
            self.steps[step.node] = RemoteCommand(
                f"{name}-{step.node}",
                connection=step.runs_on.ssh.to_props(),
                create=step.script,
                check=step.check,
                environment={HEAD_ID_ENV: head_id},
                label=step.node,
                timeout=timeout,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[head]),
            )
        # Every worker's step succeeded only with the head's ID, so the head's ID is every node's.
        self.image_id = head_id
        self.register_outputs({"image_id": self.image_id})
