"""`spark-llm logs`: every node's engine log, each line prefixed by its node, interleaved by timestamp.

The lines come from `docker logs --timestamps` on each node (its own clock: `spark-llm preflight` checks the
skew). `--follow` streams until Ctrl-C; `--json` prints one JSON object a line (node, time, text).
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from rich.console import Console
from rich.text import Text

from spark_llm.group.logs import logs_command
from spark_llm.group.times import split_stamp
from spark_llm.ops import render
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.remote.runner import failure_of
from spark_llm.remote.runner import run as run_on

# In --follow, a line waits this long for older lines from slower nodes before it is printed.
HOLD_SECONDS = 0.5
# ...and the first lines wait this long for every node's first line (a worker answers through the head).
FIRST_LINES_SECONDS = 5.0
NODE_STYLES = ("cyan", "magenta", "green", "yellow", "blue", "red")


@dataclass(frozen=True)
class LogLine:
    node: str
    time_ns: int
    """Docker's timestamp of the line in nanoseconds since the epoch (0: the line had none)."""
    text: str

    @property
    def stamp(self) -> str:
        """The time as `2026-11-30T11:00:22.991246Z` (microseconds), or blanks when the line had none."""
        if not self.time_ns:
            return " " * 27
        seconds, nanos = divmod(self.time_ns, 1_000_000_000)
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"


def parse_line(node: str, raw: str) -> LogLine:
    """Pure: one `docker logs --timestamps` line (RFC 3339 with up to 9 fraction digits, trailing zeros cut)."""
    time_ns, text = split_stamp(raw.rstrip("\n"))
    return LogLine(node, time_ns or 0, text)


def interleave(per_node: Mapping[str, Sequence[LogLine]]) -> list[LogLine]:
    """Pure: all nodes' lines in time order; equal times keep node order, then each node's own order."""
    merged = [line for lines in per_node.values() for line in lines]
    return sorted(merged, key=lambda line: line.time_ns)


def format_line(line: LogLine, width: int) -> str:
    return f"{line.node:<{width}} {line.stamp} {line.text}"


def split_ripe(
    pending: list[tuple[float, LogLine]], latest: dict[str, int], ended: set[str], nodes: Sequence[str], now: float
) -> tuple[list[LogLine], list[tuple[float, LogLine]]]:
    """Pure: (lines to print now, in time order; lines to hold). A line is printed once every other live node
    has sent a line at least as new (nothing older can come from there), or after HOLD_SECONDS."""
    ripe, held = [], []
    for arrived, line in pending:
        others = [n for n in nodes if n != line.node and n not in ended]
        if now - arrived >= HOLD_SECONDS or all(latest.get(n, -1) >= line.time_ns for n in others):
            ripe.append(line)
        else:
            held.append((arrived, line))
    return sorted(ripe, key=lambda line: line.time_ns), held


def node_logs_command(container: str, tail: int, follow: bool) -> str:
    return logs_command(container, tail=tail, timestamps=True, follow=follow) + "\n"


class Printer:
    """Writes lines as text (coloured by node on a terminal) or as JSON lines."""

    def __init__(self, nodes: Sequence[str], as_json: bool) -> None:
        self.as_json = as_json
        self.width = max(len(n) for n in nodes)
        self.styles = {n: NODE_STYLES[i % len(NODE_STYLES)] for i, n in enumerate(nodes)}
        self.console = Console(highlight=False, soft_wrap=True) if render.stdout_is_terminal() else None

    def write(self, lines: Iterable[LogLine]) -> None:
        for line in lines:
            if self.as_json:
                sys.stdout.write(json.dumps({"node": line.node, "time": line.stamp.strip(), "text": line.text}) + "\n")
            elif self.console is not None:
                text = Text(f"{line.node:<{self.width}} ", style=self.styles[line.node])
                text.append(f"{line.stamp} ", style="dim")
                text.append(line.text)
                self.console.print(text)
            else:
                sys.stdout.write(format_line(line, self.width) + "\n")
        sys.stdout.flush()


def problem(node: str, text: str) -> str:
    if "no such container" in text.lower():
        return f"{node}: no engine container (not deployed, or removed): {text.strip().splitlines()[-1]}"
    return f"{node}: {text.strip().splitlines()[-1] if text.strip() else 'failed'}"


def show(plan: DeploymentPlan, nodes: Sequence[NodePlan], tail: int, printer: Printer, timeout: float) -> int:
    """Every node's last `tail` lines, interleaved."""
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        runs = list(
            pool.map(lambda n: run_on(n.ssh, node_logs_command(plan.container, tail, False), timeout=timeout), nodes)
        )
    per_node: dict[str, list[LogLine]] = {}
    failed = 0
    for node, run in zip(nodes, runs, strict=True):
        if run.ssh_failed:
            failure = failure_of(run)
            sys.stderr.write(f"{node.name}: {failure.kind}: {failure.message}\n")
            failed += 1
        elif not run.ok:
            sys.stderr.write(problem(node.name, run.stdout) + "\n")
            failed += 1
        else:
            per_node[node.name] = [parse_line(node.name, raw) for raw in run.stdout.splitlines()]
    printer.write(interleave(per_node))
    return 1 if failed else 0


def follow(plan: DeploymentPlan, nodes: Sequence[NodePlan], tail: int, printer: Printer) -> int:
    """Stream every node's log until Ctrl-C (or until every stream ends), in time order within HOLD_SECONDS."""
    arrivals: queue.Queue[tuple[float, LogLine] | str] = queue.Queue()
    stop = threading.Event()

    def stream(node: NodePlan) -> None:
        def arrived(raw: str) -> None:
            arrivals.put((time.monotonic(), parse_line(node.name, raw)))

        run = run_on(
            node.ssh, node_logs_command(plan.container, tail, True), timeout=None, on_line=arrived, cancel=stop
        )
        if run.code != 0 and not stop.is_set():
            sys.stderr.write(f"{node.name}: the log stream ended (exit {run.code}) {run.stderr.strip()}\n")
        arrivals.put(node.name)  # this node's stream ended

    threads = [threading.Thread(target=stream, args=(n,), daemon=True) for n in nodes]
    for thread in threads:
        thread.start()
    start = time.monotonic()
    pending: list[tuple[float, LogLine]] = []
    latest: dict[str, int] = {}  # each node's newest line so far: its stream is in time order
    ended: set[str] = set()
    try:
        while len(ended) < len(nodes) or pending:
            try:
                item = arrivals.get(timeout=0.1)
                if isinstance(item, str):
                    ended.add(item)
                else:
                    pending.append(item)
                    latest[item[1].node] = max(latest.get(item[1].node, 0), item[1].time_ns)
            except queue.Empty:
                pass
            now = time.monotonic()
            heard = set(latest) | ended
            if len(heard) < len(nodes) and now - start < FIRST_LINES_SECONDS:
                continue
            ripe, pending = split_ripe(pending, latest, ended, [n.name for n in nodes], now)
            printer.write(ripe)
    except KeyboardInterrupt:
        printer.write(sorted((line for _, line in pending), key=lambda line: line.time_ns))
    finally:
        stop.set()  # every stream's ssh is killed by its runner
        for thread in threads:
            thread.join(timeout=5)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node", "-n", action="append", help="only this node (repeatable; default: every node)")
    parser.add_argument("--tail", "-t", type=int, default=100, help="last lines per node (100)")
    parser.add_argument("--follow", "-f", action="store_true", help="keep streaming new lines until Ctrl-C")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per node without --follow (60)")


def run(pulumi: PulumiCli, plan: DeploymentPlan, args: argparse.Namespace) -> int:
    known = [n.name for n in plan.nodes]
    unknown = [n for n in args.node or [] if n not in known]
    if unknown:
        sys.stderr.write(f"spark-llm logs: unknown node {', '.join(unknown)}; the stack's nodes: {', '.join(known)}\n")
        return 2
    nodes = [n for n in plan.nodes if not args.node or n.name in args.node]
    printer = Printer([n.name for n in nodes], args.json)
    if args.follow:
        return follow(plan, nodes, args.tail, printer)
    return show(plan, nodes, args.tail, printer, args.timeout)
