"""`spark-llm top`: the cluster as numbers, live, from the stack's Prometheus (spark-llm:monitoring).

Per model: generated and prompt tokens/s, running and waiting requests, time to first token (p50, p95) and KV-cache
use; per node: memory available, page cache, GPU power, temperature and SM clock (from the head's agent, where the
node has a GPU); then every alert firing or pending. The numbers are the dashboard's panels
(spark_llm.plan.monitoring.panels), each asked of Prometheus at one instant, so a row never mixes two moments.
`--once` prints one view and exits (`--json` for scripts: every number, the instant, and the query it came from);
otherwise it redraws every `--interval` seconds until Ctrl-C.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from spark_llm.ops import render
from spark_llm.ops.prometheus import Alert, Prometheus, PrometheusError, for_stack
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.plan.monitoring.panels import Panel, panels
from spark_llm.plan.stack import StackPlan

INTERVAL_SECONDS = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="print one view and exit (with --json: as JSON)")
    parser.add_argument(
        "--interval", type=float, default=INTERVAL_SECONDS, help=f"seconds between views ({INTERVAL_SECONDS:g})"
    )


@dataclass(frozen=True)
class View:
    at: float
    """The instant every number was asked at (Unix time)."""
    models: dict[str, dict[str, float | None]]
    nodes: dict[str, dict[str, float | None]]
    alerts: list[Alert]
    panels: list[Panel]

    def to_json(self) -> dict:
        def clean(values: dict[str, float | None]) -> dict[str, float | None]:
            return {k: None if v is None or math.isnan(v) else v for k, v in values.items()}

        return {
            "at": self.at,
            "models": {name: clean(values) for name, values in self.models.items()},
            "nodes": {name: clean(values) for name, values in self.nodes.items()},
            "alerts": [alert.to_json() for alert in self.alerts],
            "queries": {panel.key: panel.expr for panel in self.panels},
        }


def read_view(prometheus: Prometheus, stack: StackPlan, at: float) -> View:
    """Every panel asked at `at`; a model or node with no series for a panel reads None there."""
    shown = panels(stack)
    models: dict[str, dict[str, float | None]] = {name: {} for name in stack.models}
    nodes: dict[str, dict[str, float | None]] = {node.name: {} for node in stack.nodes}
    for panel in shown:
        rows = models if panel.by == "model" else nodes
        for row in rows.values():
            row[panel.key] = None
        for sample in prometheus.query(panel.expr, at):
            name = sample.labels.get(panel.by)
            if name in rows:
                rows[name][panel.key] = sample.value
    return View(at, models, nodes, prometheus.alerts(), shown)


def _number(value: float | None, unit: str) -> str:
    if value is None or math.isnan(value):
        return "-"
    if unit == "bytes":
        return f"{value / 2**30:.1f} GiB"
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
    if unit == "percentunit":
        return f"{value * 100:.0f} %"
    if unit == "watt":
        return f"{value:.0f} W"
    if unit == "celsius":
        return f"{value:.0f} °C"
    if unit == "hertz":
        return f"{value / 1e6:.0f} MHz"
    if value == int(value):
        return f"{value:.0f}"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def _table(title: str, by: str, rows: dict[str, dict[str, float | None]], shown: list[Panel]) -> RenderableType:
    columns = [p for p in shown if p.by == by]
    return render.table(
        title,
        [by, *(p.column for p in columns)],
        [[name, *(_number(values.get(p.key), p.unit) for p in columns)] for name, values in rows.items()],
    )


def view_renderable(view: View, endpoint: str) -> RenderableType:
    stamp = time.strftime("%H:%M:%S", time.localtime(view.at))
    lines: list[RenderableType] = [
        Text(f"spark-llm top: {endpoint} at {stamp}", style="bold"),
        _table("models", "model", view.models, view.panels),
        _table("nodes", "node", view.nodes, view.panels),
    ]
    if not view.alerts:
        lines.append(Text("alerts: none firing", style="green"))
    for alert in view.alerts:
        style = "bold red" if alert.state == "firing" else "yellow"
        lines.append(Text(f"{alert.state} {alert.name}: {alert.description or alert.summary}", style=style))
    return Group(*lines)


def run(pulumi: PulumiCli, stack: StackPlan, args: argparse.Namespace) -> int:
    prometheus = for_stack(stack)
    if prometheus is None:
        sys.stderr.write(
            "spark-llm top: the stack has no spark-llm:monitoring; turn it on (docs/monitoring.md) and `pulumi up`\n"
        )
        return 2
    try:
        if args.once or args.json:
            view = read_view(prometheus, stack, time.time())
            if args.json:
                render.emit_json(view.to_json())
            else:
                render.console().print(view_renderable(view, prometheus.endpoint))
            return 0
        with Live(refresh_per_second=1, console=render.console()) as live:
            while True:
                live.update(view_renderable(read_view(prometheus, stack, time.time()), prometheus.endpoint))
                time.sleep(max(args.interval, 0.5))
    except PrometheusError as err:
        sys.stderr.write(f"spark-llm top: {err}\n")
        return 1
    except KeyboardInterrupt:
        return 0
