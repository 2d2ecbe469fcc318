"""`spark-llm restart`: the engine group restarted in order, through Pulumi (no side channel).

Runs `pulumi up --yes --replace URN` for every worker's engine container (its `docker.Container`, URNs from
`pulumi stack export`), and for the step that stops the supervisor when the stack has one; the head follows by
its labels (it holds the workers' IDs), so the order is the one every rollout uses:
head stopped, workers stopped, workers started, head started, then the readiness gate. Afterwards
`pulumi preview --expect-no-changes` must be clean, and the containers' start times show the order.

In a stack of several models, `--model NAME` restarts that model's group alone (the resources under its
component, `spark` for the first model, `spark-<key>` for the others): the other models' containers are not
replaced. A group of the head alone is restarted by replacing the head's container (the program then restarts it
as a new generation, in order).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from spark_llm.group.times import docker_time
from spark_llm.ops import render
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.ops.status import read as status_read
from spark_llm.plan.cli_flags import engine_component
from spark_llm.plan.deployment import DeploymentPlan

ENGINE_CONTAINER_TYPE = "docker:index/container:Container"


def _live(export: dict) -> list[dict]:
    return [r for r in export.get("deployment", {}).get("resources") or [] if not r.get("delete")]


def member_urns(export: dict, plan: DeploymentPlan) -> list[str]:
    """Pure: the URNs this restart replaces, in plan order: the workers' engine containers (the head follows by its
    labels, which hold the workers' IDs); a group of the head alone (a small model of several): the head's.

    A container resource is named `<component>-<node>` (components/engine_group.py); its labels may be a secret
    in the export (with an API key), so the node is read from the URN's name. Only this group's component counts:
    another model's containers on the same nodes are not touched.
    """
    replaced = list(plan.workers) or [plan.head]
    names = {f"{engine_component(plan.unit)}-{node.name}": node.name for node in replaced}
    by_node = {
        names[name]: r["urn"]
        for r in _live(export)
        if r.get("type") == ENGINE_CONTAINER_TYPE and (name := str(r["urn"]).rsplit("::", 1)[-1]) in names
    }
    return [by_node[n.name] for n in replaced if n.name in by_node]


def supervisor_stop_urns(export: dict, plan: DeploymentPlan) -> list[str]:
    """Pure: the URN of the step that stops this group's supervisor (components.engine_group, with
    spark-llm:supervisor), if the stack has one. Replaced too, so the supervisor is stopped before any member is
    (the members' own stop steps do not run for a `--replace`); the new group gets a new supervisor at the end of
    the `up`."""
    stop = f"::{engine_component(plan.unit)}-stop-supervisor"
    return [r["urn"] for r in _live(export) if str(r.get("urn", "")).endswith(stop)]


def start_order(statuses: Sequence[status_read.NodeStatus]) -> list[str]:
    """Pure: the running members by the time their containers started, earliest first."""
    running = [(docker_time(s.started_at), s.node) for s in statuses if s.state == "running"]
    return [node for at, node in sorted((t, n) for t, n in running if t is not None)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask first (on a terminal it asks)")


def run(pulumi: PulumiCli, plan: DeploymentPlan, args: argparse.Namespace) -> int:
    urns = member_urns(pulumi.export(), plan)
    replaced = list(plan.workers) or [plan.head]
    if len(urns) < len(replaced):
        missing = [n.name for n in replaced if not any(u.endswith(f"-{n.name}") for u in urns)]
        sys.stderr.write(
            f"spark-llm restart: no engine container of {plan.model_name} in the stack's state for"
            f" {', '.join(missing)}; run `pulumi up` first\n"
        )
        return 2
    if not args.yes and sys.stdin.isatty() and not args.json:
        planned = ", ".join(plan.start_order)
        answer = input(f"Restart the engine group of {plan.model_name} ({planned}) with `pulumi up --replace`? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            return 1
    before, _, _ = status_read.collect(plan)
    export = pulumi.export()
    replace = [arg for urn in [*supervisor_stop_urns(export, plan), *urns] for arg in ("--replace", urn)]
    start = time.monotonic()
    out = sys.stderr if args.json else sys.stdout
    code, up_output = pulumi.stream("up", "--yes", *replace, config=True, out=out)
    up_seconds = time.monotonic() - start
    preview_code, _ = pulumi.stream("preview", "--expect-no-changes", config=True, out=out) if code == 0 else (-1, "")
    statuses, _, _ = status_read.collect(plan)
    order = start_order(statuses)
    in_order = order == list(plan.start_order)
    started_before = {s.node: s.started_at for s in before}
    restarted = [s.node for s in statuses if s.state == "running" and s.started_at != started_before.get(s.node)]
    ok = code == 0 and preview_code == 0 and in_order and len(restarted) == len(plan.nodes)
    if args.json:
        render.emit_json(
            {
                "ok": ok,
                "replaced": urns,
                "up_exit": code,
                "up_seconds": round(up_seconds, 1),
                "preview_clean": preview_code == 0,
                "start_order": order,
                "expected_order": plan.start_order,
                "restarted": restarted,
                "nodes": [
                    {
                        "node": s.node,
                        "state": s.state,
                        "started_before": started_before.get(s.node),
                        "started_at": s.started_at,
                    }
                    for s in statuses
                ],
            }
        )
    else:
        console = render.console()
        rows = [[s.node, s.state, started_before.get(s.node) or "-", s.started_at] for s in statuses]
        columns = ["node", "state", "started before", "started now"]
        console.print(render.table("restart: the engine containers", columns, rows))
        console.print(
            f"pulumi up: exit {code} in {up_seconds:.0f} s; started in order {' -> '.join(order) or '-'} "
            f"({'as planned' if in_order else 'expected ' + ' -> '.join(plan.start_order)}); "
            f"pulumi preview --expect-no-changes: {'clean' if preview_code == 0 else 'NOT clean'}"
        )
    return 0 if ok else 1
