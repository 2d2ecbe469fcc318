"""`spark-llm status` of a stack of several models (spark-llm:models): a row per model, then each model's block.

Each model is its own engine group (its members, revision, supervisor and budget, canary, start timeline and
weights), judged by the same code as a stack of one (spark_llm.ops.status.command.model_report); the row says in
one line what its block says at length. `--json` is one document keyed by model, each value what `status --json`
prints for a stack of one, with the supervisor's budget beside it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rich.text import Text

from spark_llm.ops import render
from spark_llm.ops.status.report import ModelReport
from spark_llm.ops.status.router import RouterStatus

COLUMNS = ["model", "members", "revision", "state", "canary", "last start", "supervisor", "weights"]


def members(report: ModelReport) -> str:
    """Pure: the group's members in rank order with their container's state (`head running, worker-1 exited`)."""
    return ", ".join(f"{s.node} {s.state}" for s in report.statuses)


def revision(report: ModelReport) -> str:
    """Pure: the revision the head runs, and the config's when it differs."""
    head = next((s for s in report.statuses if s.role == "head"), None)
    running = head.revision if head is not None and head.revision else "-"
    wanted = report.plan.group_revision
    return running if running == wanted else f"{running} (config: {wanted})"


def budget(report: ModelReport) -> dict | None:
    """Pure: the supervisor's restart budget (spark-llm:supervisor) and what this group used of it; None: none."""
    cfg = report.plan.supervisor
    if cfg is None:
        return None
    supervised = report.supervised
    return {
        "max_restarts": cfg.max_restarts,
        "window_seconds": cfg.window_seconds,
        "restarts": len(supervised.restarts) if supervised is not None else 0,
        "gave_up": bool(supervised is not None and supervised.gave_up),
        "container": report.watcher,
    }


def budget_text(report: ModelReport) -> str:
    found = budget(report)
    if found is None:
        return "none"
    used = f"{found['restarts']}/{found['max_restarts']} restarts per {found['window_seconds']} s"
    return f"gave up ({used})" if found["gave_up"] else f"{found['container'] or '?'}, {used}"


def last_start(report: ModelReport) -> str:
    """Pure: when the readiness gate last saw this group start, and how long rank 0 took to answer."""
    timeline = report.timeline
    if not timeline.get("at"):
        return "-"
    return f"{timeline['at']}, answered {timeline.get('gate_seconds', '?')} s in"


def row(report: ModelReport) -> list[str]:
    weights = "as verified" if not report.weights else "; ".join(report.weights)
    return [
        report.plan.model_name,
        members(report),
        revision(report),
        report.state,
        report.canary.note,
        last_start(report),
        budget_text(report),
        weights,
    ]


def to_json(reports: Sequence[ModelReport], gateway: RouterStatus | None = None) -> dict:
    ok = all(r.in_sync for r in reports) and (gateway is None or gateway.ok)
    out = {
        "state": "in sync" if ok else "attention",
        "models": {r.plan.model_name: {**r.to_json(), "supervisor_budget": budget(r)} for r in reports},
    }
    return {**out, "router": gateway.to_json()} if gateway is not None else out


def emit(
    reports: Sequence[ModelReport],
    args: argparse.Namespace,
    gateway: RouterStatus | None = None,
    more: dict | None = None,
) -> None:
    """`more`: the stack's own fields beside the models in --json (a killed `up`'s pending operations)."""
    if args.json:
        render.emit_json({**to_json(reports, gateway), **(more or {})})
        return
    out = render.console()
    out.print(render.table(f"status: {len(reports)} models", COLUMNS, [row(r) for r in reports]))
    if gateway is not None:
        out.print(Text(gateway.sentence()))
    for report in reports:
        out.print(Text(""))
        report.print(out, getattr(args, "hosts", False))
