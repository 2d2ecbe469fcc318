"""`spark-llm status`: what runs on every node against what the config gives now, and the head's health.

Per node: the engine container, its state, uptime, exit code when it exited, and the group revision it was
started with (its group revision label, spark_llm.plan.container.LABEL_REVISION) against `plan.group_revision`,
read by the program's own container probe (spark_llm.plan.observation.ENGINE_STATE_FUNCTION); on the head,
`/health` and the model `/v1/models` serves (curl on the head itself). The group is judged as `pulumi preview`
judges it (`differences`: a member absent, exited, on another revision or restarted after the head;
spark_llm.plan.drift makes the program restart the group for the same facts), so when this says "drift" it also
says what `pulumi up` does. When the group is in sync, the canary (spark_llm.ops.status_canary): a fixed
completion at temperature 0 against the one the readiness gate recorded for the revision; a different answer is
"answers changed", with both answers shown.
Exit 1 on drift, an unhealthy head or a changed answer.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime

from rich.table import Table
from rich.text import Text

from spark_llm.ops import render
from spark_llm.ops.pulumi_cli import PulumiCli, PulumiError
from spark_llm.ops.sections import SECTION_FUNCTION, Section, parse_sections
from spark_llm.ops.status_canary import canary_lines, check_canary
from spark_llm.plan.container import LABEL_REVISION
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import OWNER_STEP, owner_record
from spark_llm.plan.observation import ENGINE_STATE_FUNCTION, TOKENS_DIR, parse_probe
from spark_llm.plan.start_phases import PROFILE_ENGINES, phases_for
from spark_llm.plan.start_timeline import (
    START_HISTORY,
    failed_start_warning,
    last_failure,
    last_start_probe,
    phase_seconds,
)
from spark_llm.plan.supervisor import SupervisorReport, state_path
from spark_llm.remote.runner import NodeRun, failure_of, quote
from spark_llm.remote.runner import run as run_on

STATE_STYLES = {
    "in sync": "green",
    "drift": "bold red",
    "failed_start": "bold red",
    "unhealthy": "yellow",
    "answers changed": "bold red",
}
# curl's exit codes for "the engine does not answer", in words.
CURL_ERRORS = {7: "nothing listens on the port", 28: "timed out after 5 s", 52: "empty reply", 56: "connection reset"}


@dataclass(frozen=True)
class NodeStatus:
    """One node's engine container as docker reports it (state "absent" without one, "unreachable" without ssh)."""

    node: str
    role: str
    container: str
    state: str
    exit_code: int | None = None
    started_at: str = ""
    finished_at: str = ""
    revision: str = ""
    container_id: str = ""
    oom_killed: bool = False
    uptime_s: float | None = None
    error: str = ""
    owner: str = ""
    """The state that started this container, from the node's owner record (spark_llm.plan.drift.OWNER_STEP); empty
    when the record names another container or is missing."""


@dataclass(frozen=True)
class Health:
    """The head's answers: /health's HTTP code and the model ids /v1/models lists."""

    http_code: int | None
    models: tuple[str, ...]
    error: str = ""
    last_start: str = ""
    """The head's latest history line about the configured revision (JSON; empty: none)."""

    @property
    def healthy(self) -> bool:
        return self.http_code == 200


def node_script(plan: DeploymentPlan, node: NodePlan) -> str:
    lines = [
        SECTION_FUNCTION + ENGINE_STATE_FUNCTION,
        f"capture engine engine_state {quote(plan.container)}",
        "capture now date -u +%s.%N",
        f"capture owner cat {quote(f'{node.remote_dir}/{TOKENS_DIR}/{OWNER_STEP}')}",
    ]
    if node.role == "head":
        # The API key goes to curl through a file descriptor, never onto a command line.
        key = plan.config.api_key
        auth = f"-H @<(printf 'Authorization: Bearer %s\\n' {quote(key)})" if key else ""
        url = f"http://{plan.api_address}:{plan.port}"
        lines += [
            f"health() {{ curl -sS -m 5 -o /dev/null -w '%{{http_code}}' {auth} {url}/health; }}",
            f"models() {{ curl -sS -m 5 -f {auth} {url}/v1/models; }}",
            "capture health health",
            "capture models models",
            # Did the configured revision fail to start last time (the readiness gate's history on the head)?
            f"last_start() {{\n{last_start_probe(f'{node.remote_dir}/{START_HISTORY}', plan.group_revision)}}}",
            "capture last_start last_start",
        ]
        if plan.supervisor is not None:
            lines.append(f"capture supervisor cat {quote(state_path(node))}")
    return "\n".join(lines) + "\n"


_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$")


def parse_time(text: str) -> float | None:
    """Pure: docker's RFC 3339 time (nanoseconds, `Z`) -> epoch seconds; None for docker's zero time."""
    match = _RFC3339.match(text)
    if not match or text.startswith("0001-"):
        return None
    zone = match.group(3) if match.group(3) not in (None, "Z") else "+00:00"
    return datetime.fromisoformat(match.group(1) + zone).timestamp() + float("0." + (match.group(2) or "0"))


def node_status(node: NodePlan, container: str, run: NodeRun) -> NodeStatus:
    """Pure: a node's status from what its script printed."""
    if run.ssh_failed:
        failure = failure_of(run)
        return NodeStatus(node.name, node.role, container, "unreachable", error=f"{failure.kind}: {failure.message}")
    sections = parse_sections(run.stdout)
    section = sections.get("engine")
    if section is None:
        return NodeStatus(node.name, node.role, container, "unknown", error=run.stderr.strip()[-200:])
    seen = parse_probe(node.name, section.body)
    engine = seen.engine
    if seen.error is not None:
        return NodeStatus(node.name, node.role, container, "unknown", error=seen.error)
    if engine.status == "absent":
        return NodeStatus(node.name, node.role, container, "absent")
    owner_section = sections.get("owner")
    owner_state, owner_container = owner_record(owner_section.first_line if owner_section and owner_section.ok else "")
    now_section = sections.get("now")
    now = float(now_section.first_line) if now_section and now_section.ok else None
    started_s = parse_time(engine.started_at)
    uptime = now - started_s if engine.running and now is not None and started_s is not None else None
    return NodeStatus(
        node=node.name,
        role=node.role,
        container=container,
        state=engine.status,
        exit_code=None if engine.running else engine.exit_code,
        started_at=engine.started_at,
        finished_at="" if engine.running else engine.finished_at,
        revision=engine.labels.get(LABEL_REVISION, ""),
        container_id=engine.container_id[:12],
        oom_killed=engine.oom_killed,
        uptime_s=uptime,
        owner=owner_state if owner_container == engine.container_id and engine.container_id else "",
    )


def head_health(run: NodeRun) -> Health:
    """Pure: the head's /health code and served models from its script's output."""
    if run.ssh_failed:
        return Health(None, (), "no ssh")
    sections = parse_sections(run.stdout)
    health = sections.get("health", Section(-1, ""))
    code = int(health.first_line) if health.first_line.isdigit() else None
    models: tuple[str, ...] = ()
    error = ""
    section = sections.get("models")
    if section is not None and section.ok:
        try:
            models = tuple(m.get("id", "?") for m in json.loads(section.body).get("data", []))
        except (ValueError, AttributeError):
            error = "/v1/models did not answer JSON"
    elif section is not None:
        error = section.first_line
    if code in (None, 0):
        code = None
        error = CURL_ERRORS.get(health.rc) or health.first_line or "no answer"
    last = sections.get("last_start", Section(-1, "")).first_line.partition("\t")[2]
    return Health(code, models, error, last)


def supervisor_report(run: NodeRun) -> SupervisorReport | None:
    """Pure: the supervisor's state file as the head's script printed it (None: none, or no supervisor)."""
    section = parse_sections(run.stdout).get("supervisor") if not run.ssh_failed else None
    return SupervisorReport.parse(section.body) if section is not None and section.ok else None


def restart_order(plan: DeploymentPlan) -> str:
    workers = [n.name for n in plan.workers]
    return ", ".join(
        [f"{plan.head.name} stopped", *(f"{w} stopped" for w in workers), *(f"{w} started" for w in workers)]
        + [f"{plan.head.name} started"]
    )


def differences(plan: DeploymentPlan, statuses: Sequence[NodeStatus], state_id: str | None = None) -> list[str]:
    """Pure: every way the group differs from what the config gives now, one phrase each.

    `state_id`: this stack's state (its `state_id` output); an engine whose owner record names another state is
    another checkout's (or a lost state's) deployment, which `pulumi up` replaces.
    """
    out = []
    head = next(s for s in statuses if s.node == plan.head.name)
    for s in statuses:
        if s.state == "absent":
            out.append(f"{s.node} has no {s.container} container")
        elif s.state in ("unreachable", "unknown"):
            out.append(f"{s.node} is {s.state} ({s.error})")
        elif s.state != "running":
            oom = ", killed for memory" if s.oom_killed else ""
            out.append(f"{s.node} {s.state} ({s.exit_code}{oom})")
        elif s.revision != plan.group_revision:
            out.append(f"{s.node} runs revision {s.revision or '(none)'}, the config gives {plan.group_revision}")
        elif s.node != head.node and head.state == "running" and _later(s.started_at, head.started_at):
            out.append(f"{s.node} restarted after the head, outside the group")
        elif state_id and s.owner and s.owner != state_id:
            out.append(f"{s.node}'s engine was started by another state of this stack")
    return out


def _later(a: str, b: str) -> bool:
    ta, tb = parse_time(a), parse_time(b)
    return ta is not None and tb is not None and ta > tb


def verdict(
    plan: DeploymentPlan, statuses: Sequence[NodeStatus], health: Health | None, state_id: str | None = None
) -> tuple[str, str]:
    """Pure: ("in sync" | "drift" | "failed_start" | "unhealthy" | "not deployed", one sentence on what `pulumi up`
    will do). failed_start: the configured revision failed to start last time and does not serve now."""
    diffs = differences(plan, statuses, state_id)
    if all(s.state == "absent" for s in statuses):
        order = ", ".join(f"{n} started" for n in plan.start_order)
        return "not deployed", f"no engine container on any node: `pulumi up` starts the group in order: {order}"
    if any(s.state in ("unreachable", "unknown") for s in statuses):
        return "drift", (
            "; ".join(diffs) + ": `pulumi preview` cannot read that node either and counts it as drift; "
            "fix its ssh first (`spark-llm preflight`)"
        )
    failure = last_failure(health.last_start, plan.group_revision) if health is not None else None
    if failure is not None and (diffs or health is None or not health.healthy):
        head = next((s for s in statuses if s.role == "head" and s.state == "running"), None)
        return "failed_start", failed_start_warning(failure, head.revision if head else None)
    if diffs:
        return "drift", f"{'; '.join(diffs)}: `pulumi up` restarts the group in order: {restart_order(plan)}"
    if health is not None and not health.healthy:
        seen = f"answers {health.http_code}" if health.http_code else f"does not answer ({health.error})"
        return "unhealthy", (
            f"every container runs revision {plan.group_revision}, but the head's /health {seen}: "
            "`pulumi preview` sees no drift; still loading? see `spark-llm logs`"
        )
    if health is not None and plan.model_name not in health.models:
        return (
            "unhealthy",
            f"the head serves {', '.join(health.models) or 'no model'}, the config says {plan.model_name}",
        )
    return (
        "in sync",
        f"every member runs revision {plan.group_revision}, the head started last; `pulumi up` does nothing",
    )


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
            answer = f"/health {health.http_code}" if health.http_code else f"/health: {health.error}"
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


def collect(
    plan: DeploymentPlan, timeout: float = 60
) -> tuple[list[NodeStatus], Health | None, SupervisorReport | None]:
    """Every node's container status (in parallel), the head's health and what the supervisor did."""
    with ThreadPoolExecutor(max_workers=len(plan.nodes)) as pool:
        runs = list(pool.map(lambda n: run_on(n.ssh, node_script(plan, n), timeout=timeout), plan.nodes))
    statuses = [node_status(node, plan.container, r) for node, r in zip(plan.nodes, runs, strict=True)]
    return statuses, head_health(runs[0]), supervisor_report(runs[0])


def stack_outputs(pulumi: PulumiCli) -> dict:
    """This stack's outputs ({} before its first `up` or when they cannot be read)."""
    try:
        value = json.loads(pulumi.capture("stack", "output", "--json"))
    except (PulumiError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def own_state_id(outputs: dict) -> str | None:
    """This stack's state id (its `state_id` output), None before its first `up` (or from an older spark-llm)."""
    value = outputs.get("state_id")
    return value if isinstance(value, str) and value else None


def timeline_lines(timeline: dict) -> list[str]:
    """Pure: the last start's phases per node, as the readiness gate recorded them (the `start_timeline` output)."""
    nodes = timeline.get("nodes") if isinstance(timeline, dict) else None
    if not nodes:
        return []
    profile = timeline.get("profile")
    titles = {spec.name: spec.title for spec in phases_for(profile)} if profile in PROFILE_ENGINES else {}
    head = (
        f"last start: revision {str(timeline.get('revision', '?'))[:12]} at {timeline.get('at', '?')}, rank 0 answered"
        f" {timeline.get('gate_seconds', '?')} s into the readiness gate"
    )
    lines = [head]
    for node in nodes:
        phases = phase_seconds(timeline, node)
        text = ", ".join(f"{titles.get(name, name)} {sec:.1f} s" for name, sec in phases.items()) or "no phases"
        lines.append(f"  {node}: {text}")
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per node (60)")


def run(pulumi: PulumiCli, plan: DeploymentPlan, args: argparse.Namespace) -> int:
    with render.progress(f"status: asking {len(plan.nodes)} nodes", enabled=not args.json):
        statuses, health, supervised = collect(plan, args.timeout)
    outputs = stack_outputs(pulumi)
    state, sentence = verdict(plan, statuses, health, own_state_id(outputs))
    if supervised is not None and supervised.gave_up and state != "in sync":
        # The group is stopped on purpose: say why, and what to do, before what differs.
        state, sentence = "supervisor gave up", f"{supervised.gave_up_sentence()} ({sentence})"
    timeline = outputs.get("start_timeline") or {}
    head = next(s for s in statuses if s.node == plan.head.name)
    running = [s.node for s in statuses if s.state == "running"]
    with render.progress("status: asking the canary", enabled=not args.json):
        canary = check_canary(plan, head.revision or plan.group_revision, running, outputs, asked=state == "in sync")
    if not canary.ok:
        state, sentence = (
            "answers changed",
            (
                f"every member runs revision {plan.group_revision}, but the canary (a fixed prompt at temperature 0)"
                f" {canary.note}: `pulumi up` does nothing (the config did not change)"
            ),
        )
    if args.json:
        render.emit_json(
            {
                "state": state,
                "drift": state == "drift",
                "summary": sentence,
                "config_revision": plan.group_revision,
                "endpoint": plan.endpoint,
                "model": plan.model_name,
                "nodes": [asdict(s) for s in statuses],
                "head": asdict(health) if health else None,
                "start_timeline": timeline,
                "canary": canary.to_json(),
                "supervisor": None
                if supervised is None
                else {
                    "restarts": list(supervised.restarts),
                    "gave_up": supervised.gave_up,
                    "waiting": supervised.waiting,
                },
            }
        )
    else:
        out = render.console()
        out.print(status_table(plan, statuses, health))
        style = STATE_STYLES.get(state, "")
        for line in supervised.lines() if supervised else []:
            out.print(Text(line))
        out.print(Text(f"{state}: ", style=style) + Text(sentence))
        for line in canary_lines(canary):
            out.print(Text(line), soft_wrap=True)  # whole lines: both answers stay greppable
        for line in timeline_lines(timeline):
            out.print(Text(line))
    return 0 if state == "in sync" else 1
