"""EngineGroup: the engine containers, started workers first and head last, and the readiness gate.

Every change to the group (its revision) replaces every container in order: head stopped, workers stopped,
workers started, head started. That order comes from resource options, not from a script:
- each worker has the group revision in its triggers and delete_before_replace (its old container must be
  gone before the new one of the same name starts);
- the head depends on the workers and has their IDs in its triggers (a plain depends_on would not
  replace it: pulumi/pulumi#838), so it is deleted before them and created after them.
Each container also has a read-only `check` (`launch.sh status`): if a container exited or was removed since the
last `up`, preview shows it as drift and `up` restarts the group in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from spark_llm.plan import DeploymentPlan, NodePlan
from spark_llm.readiness import GroupReady
from spark_llm.remote import RemoteCommand


def _start(node: NodePlan) -> str:
    return f"{node.script_path} start {node.role} {node.name}\n"


def _stop(node: NodePlan) -> str:
    return f"if [ -x {node.script_path} ]; then {node.script_path} stop {node.name}; fi\n"


def _status(node: NodePlan) -> str:
    return f"if [ -x {node.script_path} ]; then {node.script_path} status {node.name}; else echo absent; fi\n"


@dataclass(frozen=True, kw_only=True)
class EngineGroupArgs:
    plan: DeploymentPlan
    """The deployment plan: nodes in rank order, launch script paths, group revision."""
    after: list[pulumi.Resource] = field(default_factory=list)
    """Resources every container waits for (scripts, image, weights)."""
    restart_on: list[pulumi.Input[str]] = field(default_factory=list)
    """Values that restart the whole group when they change (script digest, image ID, weights manifest digest)."""


class EngineGroup(pulumi.ComponentResource):
    """Worker containers, then the head container, then a gate that passes when rank 0 generates."""

    container_ids: pulumi.Output[dict]
    ready: GroupReady

    def __init__(self, name: str, args: EngineGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:EngineGroup", name, None, opts)
        plan = args.plan

        def container(node: NodePlan, triggers: list, depends_on: list[pulumi.Resource]) -> RemoteCommand:
            return RemoteCommand(
                f"{name}-{node.name}",
                connection=node.ssh.to_props(),
                create=_start(node),
                delete=_stop(node),
                check=_status(node),
                triggers=triggers,
                label=node.name,
                opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on, delete_before_replace=True),
            )

        # The start command is in the triggers too: a container is only ever restarted with its whole group.
        group = [plan.group_revision, *args.restart_on]
        workers = [container(node, [*group, _start(node)], args.after) for node in plan.workers]
        head = container(plan.head, [*group, _start(plan.head), *[w.id for w in workers]], [*args.after, *workers])
        self.ready = GroupReady(
            f"{name}-ready",
            members=[
                {"name": n.name, "role": n.role, "connection": n.ssh.to_props(), "script_path": n.script_path}
                for n in plan.nodes
            ],
            port=plan.port,
            model=plan.model_name,
            timeout=plan.ready_timeout,
            triggers=[head.id],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[head], delete_before_replace=True),
        )
        members = {plan.head.name: head, **{n.name: w for n, w in zip(plan.workers, workers, strict=True)}}
        self.container_ids = pulumi.Output.all(
            **{name: member.stdout.apply(_last_line) for name, member in members.items()}
        )
        self.register_outputs({"container_ids": self.container_ids})


def _last_line(stdout: str | None) -> str:
    lines = (stdout or "").strip().splitlines()
    return lines[-1] if lines else ""
