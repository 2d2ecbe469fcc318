"""EngineGroup: the engine containers, started workers first and head last, and the readiness gate.

Every change to the group (its revision) replaces every container in order: head stopped, workers stopped,
workers started, head started. That order comes from resource options, not from a script:
- each worker has the group revision in its triggers and delete_before_replace (its old container must be
  gone before the new one of the same name starts);
- the head depends on the workers and has their IDs in its triggers (a plain depends_on would not
  replace it: pulumi/pulumi#838), so it is deleted before them and created after them;
- the workers are chained the same way among themselves, so a multi-member replacement is one ordered path.
Each container's diff also reads every member's status (`launch.sh status`, read-only): if any member exited,
was removed or was restarted by hand since the last `up`, preview shows drift and `up` restarts the whole
group in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from spark_llm.engine_container import EngineContainer
from spark_llm.plan import DeploymentPlan, NodePlan
from spark_llm.readiness import GroupReady


def _start(node: NodePlan) -> str:
    return f"{node.script_path} start {node.role} {node.name}\n"


def _stop(node: NodePlan) -> str:
    return f"if [ -x {node.script_path} ]; then {node.script_path} stop {node.name}; fi\n"


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

        group = [
            {"name": n.name, "role": n.role, "connection": n.ssh.to_props(), "script_path": n.script_path}
            for n in plan.nodes
        ]

        def container(node: NodePlan, triggers: list, depends_on: list[pulumi.Resource]) -> EngineContainer:
            return EngineContainer(
                f"{name}-{node.name}",
                connection=node.ssh.to_props(),
                start=_start(node),
                stop=_stop(node),
                group=group,
                group_revision=plan.group_revision,
                triggers=triggers,
                label=node.name,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    depends_on=depends_on,
                    delete_before_replace=True,
                    # With an API key the triggers carry its file's digest: kept encrypted in state.
                    additional_secret_outputs=["triggers"] if plan.api_config else None,
                ),
            )

        # The start command is in the triggers too: a container is only ever restarted with its whole group.
        restart_on = [plan.group_revision, *args.restart_on]
        # Workers form a chain (each depends on the one before, whose ID is in its triggers): when several
        # members are replaced at once, Pulumi then deletes and recreates them along one path (head, last worker,
        # ..., first worker; then first worker, ..., head) instead of racing independent replacements.
        workers: list[EngineContainer] = []
        for node in plan.workers:
            before = workers[-1:]
            workers.append(
                container(node, [*restart_on, _start(node), *[w.id for w in before]], [*args.after, *before])
            )
        head = container(plan.head, [*restart_on, _start(plan.head), *[w.id for w in workers]], [*args.after, *workers])
        self.ready = GroupReady(
            f"{name}-ready",
            # Fabric addresses too: with Ray a worker's error shows up in the head's log under the worker's address.
            members=[{**g, "fabric_address": n.fabric_address} for g, n in zip(group, plan.nodes, strict=True)],
            port=plan.port,
            model=plan.model_name,
            timeout=plan.ready_timeout,
            api_key=pulumi.Output.secret(plan.config.api_key) if plan.config.api_key else None,
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
