"""EngineGroup: the engine containers, started workers first and head last, and the readiness gate.

Every change to the group (its revision) replaces every container in order: head stopped, workers stopped,
workers started, head started. That order comes from resource options, not from a script:
- each worker has the group revision in its triggers and delete_before_replace (its old container must be
  gone before the new one of the same name starts);
- the head depends on the workers and has their IDs in its triggers (a plain depends_on would not
  replace it: pulumi/pulumi#838), so it is deleted before them and created after them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from spark_llm.plan import DeploymentPlan, NodePlan
from spark_llm.remote import RemoteCommand

# How long the readiness gate waits for rank 0 to generate before it fails the `pulumi up`.
READY_TIMEOUT_SECONDS = 300


def _start(node: NodePlan) -> str:
    return f"{node.script_path} start {node.role} {node.name}\n"


def _stop(node: NodePlan) -> str:
    return f"if [ -x {node.script_path} ]; then {node.script_path} stop {node.name}; fi\n"


def _ready_script(plan: DeploymentPlan) -> str:
    port = plan.endpoint.rsplit(":", 1)[1]
    head = plan.head
    return (
        f"deadline=$((SECONDS + {READY_TIMEOUT_SECONDS}))\n"
        "echo 'waiting for rank 0 to serve /health'\n"
        "while true; do\n"
        f"  if curl -fsS -m 5 http://127.0.0.1:{port}/health >/dev/null 2>&1; then echo ready; exit 0; fi\n"
        f"  state=$({head.script_path} status {head.name})\n"
        '  if [ "$state" != running ]; then\n'
        f'    echo "head container is $state"; {head.script_path} logs {head.name} 40; exit 1\n'
        "  fi\n"
        '  if [ "$SECONDS" -ge "$deadline" ]; then\n'
        f"    echo 'not ready after {READY_TIMEOUT_SECONDS} s'; {head.script_path} logs {head.name} 40; exit 1\n"
        "  fi\n"
        "  sleep 2\n"
        "done\n"
    )


@dataclass(frozen=True, kw_only=True)
class EngineGroupArgs:
    plan: DeploymentPlan
    """The deployment plan: nodes in rank order, launch script paths, group revision."""
    after: list[pulumi.Resource] = field(default_factory=list)
    """Resources every container waits for (scripts, image, weights)."""


class EngineGroup(pulumi.ComponentResource):
    """Worker containers, then the head container, then a gate that passes when rank 0 serves."""

    container_ids: pulumi.Output[dict]
    ready: RemoteCommand

    def __init__(self, name: str, args: EngineGroupArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:EngineGroup", name, None, opts)
        plan = args.plan
        workers = [
            RemoteCommand(
                f"{name}-{node.name}",
                connection=node.ssh.to_props(),
                create=_start(node),
                delete=_stop(node),
                triggers=[plan.group_revision],
                label=node.name,
                opts=pulumi.ResourceOptions(parent=self, depends_on=args.after, delete_before_replace=True),
            )
            for node in plan.workers
        ]
        head = RemoteCommand(
            f"{name}-{plan.head.name}",
            connection=plan.head.ssh.to_props(),
            create=_start(plan.head),
            delete=_stop(plan.head),
            triggers=[plan.group_revision, *[w.id for w in workers]],
            label=plan.head.name,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[*args.after, *workers],
                delete_before_replace=True,
            ),
        )
        self.ready = RemoteCommand(
            f"{name}-ready",
            connection=plan.head.ssh.to_props(),
            create=_ready_script(plan),
            triggers=[head.id],
            label=f"{plan.head.name} ready",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[head], delete_before_replace=True),
        )
        members = {plan.head.name: head, **{n.name: w for n, w in zip(plan.workers, workers, strict=True)}}
        self.container_ids = pulumi.Output.all(
            **{k: v.stdout.apply(lambda s: s.strip().splitlines()[-1] if s.strip() else "") for k, v in members.items()}
        )
        self.register_outputs({"container_ids": self.container_ids})
