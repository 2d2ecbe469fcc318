"""One model's group as `spark-llm status` judged it (spark_llm.ops.status.command.model_report): what it prints,
as a table and lines, and its `--json` document; a stack of several prints one per model (spark_llm.ops.status.
several)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from spark_llm.ops import render
from spark_llm.ops.status.canary import CanaryCheck, canary_lines
from spark_llm.ops.status.read import Health, NodeStatus
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.host_record import fingerprint_lines
from spark_llm.plan.start.timeline import timeline_lines
from spark_llm.plan.supervisor_report import SupervisorReport

STATE_STYLES = {
    "in sync": "green",
    "drift": "bold red",
    "failed_start": "bold red",
    "unhealthy": "yellow",
    "restarting": "yellow",
    "wedged": "bold red",
    "answers changed": "bold red",
    "off the fabric": "bold red",
}


def status_table(plan: DeploymentPlan, statuses: Sequence[NodeStatus], health: Health | None) -> Table:
    rows = []
    for s in statuses:
        if s.state == "running":
            since = render.seconds(s.uptime_s) if s.uptime_s is not None else "?"
        else:
            since = f"finished {s.finished_at[:19]}" if s.finished_at and not s.finished_at.startswith("0001") else ""
        revision = s.revision or "-"
        if s.revision and s.revision != plan.group_revision:
            revision += " (config: " + plan.group_revision + ")"
        answer = ""
        if s.role == "head" and health is not None:
            answer = f"{health.path} {health.http_code}" if health.http_code else f"{health.path}: {health.error}"
            if health.models:
                answer += f"; serves {', '.join(health.models)}"
        rows.append(
            [
                s.node,
                s.role,
                s.container + (f" {s.container_id}" if s.container_id else ""),
                s.state + (f" ({s.error})" if s.error else ""),
                since,
                "" if s.exit_code is None else str(s.exit_code),
                revision,
                answer,
            ]
        )
    columns = ["node", "role", "container", "state", "uptime", "exit", "revision", "head"]
    return render.table(f"status: {plan.model_name} at {plan.endpoint}", columns, rows)


@dataclass(frozen=True)
class ModelReport:
    """One model's group as status judged it: its verdict, and everything said about it."""

    plan: DeploymentPlan
    state: str
    sentence: str
    statuses: list[NodeStatus]
    health: Health | None
    supervised: SupervisorReport | None
    watcher: str
    timeline: dict
    changes: list
    host_warning: str
    canary: CanaryCheck
    weights: list[str]

    @property
    def in_sync(self) -> bool:
        return self.state == "in sync"

    def to_json(self) -> dict:
        supervised = self.supervised
        return {
            "state": self.state,
            "drift": self.state == "drift",
            "summary": self.sentence,
            "config_revision": self.plan.group_revision,
            "endpoint": self.plan.endpoint,
            "model": self.plan.model_name,
            "nodes": [asdict(s) for s in self.statuses],
            "head": asdict(self.health) if self.health else None,
            "start_timeline": self.timeline,
            "host_changes": [str(c) for c in self.changes],
            "canary": self.canary.to_json(),
            "weights": self.weights,
            "supervisor": None
            if supervised is None
            else {
                "restarts": list(supervised.restarts),
                "gave_up": supervised.gave_up,
                "waiting": supervised.waiting,
                "container": self.watcher,
            },
        }

    def print(self, out: Console, hosts: bool = False) -> None:
        plan = self.plan
        out.print(status_table(plan, self.statuses, self.health))
        style = STATE_STYLES.get(self.state, "")
        if self.watcher:
            out.print(Text(f"supervisor: its container on {plan.head.name} is {self.watcher}"))
        for line in self.supervised.lines() if self.supervised else []:
            out.print(Text(line))
        out.print(Text(f"{self.state}: ", style=style) + Text(self.sentence))
        for line in canary_lines(self.canary):
            out.print(Text(line), soft_wrap=True)  # whole lines: both answers stay greppable
        for line in timeline_lines(self.timeline):
            out.print(Text(line))
        if self.host_warning:
            out.print(Text(f"warning: {self.host_warning}", style="yellow"), soft_wrap=True)
        if hosts:
            for line in fingerprint_lines(self.timeline) if self.timeline.get("hosts") else ["no host recorded yet"]:
                out.print(Text(line), soft_wrap=True)
