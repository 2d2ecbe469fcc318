"""What `spark-llm status` reads from each node, in one ssh session per node (all at once): the engine container
through the program's own container probe (spark_llm.plan.observation.ENGINE_STATE_FUNCTION), its owner record, the
node's clock; on the head also `/health` and `/v1/models` (curl on the head itself), the readiness gate's last word
on the configured revision, and the supervisor's state file. The parsers are pure; spark_llm.ops.status.command judges.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from spark_llm.group.history import StartRecord, last_start_probe, parse_history, read_script
from spark_llm.group.serving import COMPLETIONS_PATH, health_path, serving_request
from spark_llm.group.times import docker_time
from spark_llm.group.wedge import LIVENESS_PATH, unanswered_while_live
from spark_llm.ops.sections import SECTION_FUNCTION, Section, parse_sections
from spark_llm.ops.status.gpu_clock import probe as clock_probe
from spark_llm.ops.status.router import RouterStatus, router_lines, router_status
from spark_llm.plan import firewall
from spark_llm.plan.container import LABEL_REVISION
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import OWNER_STEP, owner_record
from spark_llm.plan.host_record import host_probe, parse_host_lines
from spark_llm.plan.memory import probe_command
from spark_llm.plan.observation import (
    ENGINE_STATE_FUNCTION,
    TOKENS_DIR,
    NodeObservation,
    grouped_script,
    parse_probe,
    probe_script,
    split_probe,
)
from spark_llm.plan.router import RouterPlan
from spark_llm.plan.stack import StackPlan
from spark_llm.plan.supervisor import CONTAINER_NAME as SUPERVISOR_CONTAINER
from spark_llm.plan.supervisor import state_path
from spark_llm.plan.supervisor_report import SupervisorReport
from spark_llm.plan.weights.steps import weights_plan
from spark_llm.remote.runner import NodeRun, failure_of, quote
from spark_llm.remote.runner import run as run_on

# curl's exit codes for "the engine does not answer", in words.
CURL_ERRORS = {7: "nothing listens on the port", 28: "timed out after 5 s", 52: "empty reply", 56: "connection reset"}
ANSWER_SECONDS = 10
"""How long status waits for rank 0's one-token completion (spark_llm.group.wedge: a slower one is no answer)."""


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
    host: dict[str, str] = field(default_factory=dict)
    """The node's host now (spark_llm.plan.host_record), compared with the last start that served."""


@dataclass(frozen=True)
class Health:
    """The head's answers: /health's HTTP code and the model ids /v1/models lists."""

    http_code: int | None
    models: tuple[str, ...]
    error: str = ""
    path: str = "/health"
    """The engine's health route asked (spark_llm.group.serving.HEALTH_PATHS)."""
    supervisor: str = ""
    """The supervisor's container on the head: running, exited, ..., absent ("": the stack has no supervisor)."""
    last_start: str = ""
    """The head's latest history line about the configured revision (JSON; empty: none)."""
    live: int | None = None
    """The liveness route's (/health) HTTP code; None: not asked, or no answer."""
    answer: int | None = None
    """The one-token completion's HTTP code (spark_llm.group.serving); None: not asked, or no answer."""
    answer_error: str = ""
    """How the completion failed when it got no answer (`no answer within 10 s`)."""

    @property
    def healthy(self) -> bool:
        return self.http_code == 200

    @property
    def wedged(self) -> bool:
        """Up by its liveness route, yet no answer to the completion (spark_llm.group.wedge)."""
        return unanswered_while_live(self.live, self.answer)


HISTORY_READ = 20
"""Starts read from the head's history (the gate keeps its last 20): the canary's record is looked up there."""


def node_script(plan: DeploymentPlan, node: NodePlan, router: RouterPlan | None = None) -> str:
    """One group's reading of one node (`router`: on the head, the router's too). The program's own probe of the
    node with the weights' live digest (`probe`: what preview judges the weights' drift from, spark_llm.ops.status
    .weights) runs in a subshell of its own, since it ends with `exit` when Docker does not answer."""
    # What preview judges the weights' and the firewall's drift from (spark_llm.ops.status.weights, .firewall), and
    # the memory sections the admission judges before `up` stops anything (spark_llm.ops.status.memory).
    weights_probe = weights_plan(plan).probes[node.name]
    probe = weights_probe + firewall.probe(plan) + probe_command(plan.model_path)
    # And a capped node's clock and records (spark_llm.ops.status.gpu_clock).
    probe += clock_probe(plan, node.name, node.ssh.user)
    lines = [
        SECTION_FUNCTION + ENGINE_STATE_FUNCTION,
        f"capture engine engine_state {quote(plan.container)}",
        f"probe_now() (\n{probe_script(plan, node, probe)}\n)",
        "capture probe probe_now",
        "capture now date -u +%s.%N",
        f"capture owner cat {quote(f'{node.remote_dir}/{TOKENS_DIR}/{OWNER_STEP}')}",
        f"host_now() {{\n{host_probe(plan)}}}",
        "capture host host_now",
    ]
    if node.role == "head":
        # The API key goes to curl through a file descriptor, never onto a command line.
        key = plan.api_key
        auth = f"-H @<(printf 'Authorization: Bearer %s\\n' {quote(key)})" if key else ""
        url = f"http://{plan.api_address}:{plan.port}"
        lines += [
            f"health() {{ curl -sS -m 5 -o /dev/null -w '%{{http_code}}' {auth} {url}{health_path(plan.engine)}; }}",
            f"models() {{ curl -sS -m 5 -f {auth} {url}/v1/models; }}",
            # Liveness and a one-token completion: both engines' /health stays 200 while a collective hangs.
            f"live() {{ curl -sS -m 5 -o /dev/null -w '%{{http_code}}' {url}{LIVENESS_PATH}; }}",
            f"answer() {{ curl -sS -m {ANSWER_SECONDS} -o /dev/null -w '%{{http_code}}' {auth}"
            f" -H 'Content-Type: application/json' -d {quote(json.dumps(serving_request(plan.model_name)))}"
            f" {url}{COMPLETIONS_PATH}; }}",
            "capture health health",
            "capture models models",
            "capture live live",
            "capture answer answer",
            # Did the configured revision fail to start last time (the readiness gate's history on the head)?
            f"last_start() {{\n{last_start_probe(plan.history_path, plan.group_revision)}}}",
            "capture last_start last_start",
            f"history() {{\n{read_script(plan.history_path, HISTORY_READ)}}}",
            "capture history history",
        ]
        if router is not None:
            lines += router_lines(router)
        if plan.supervisor is not None:
            lines.append(f"capture supervisor cat {quote(state_path(node))}")
            fmt = quote("{{.State.Status}}")
            lines.append(f"capture supervisor_container docker inspect -f {fmt} {SUPERVISOR_CONTAINER}")
    return "\n".join(lines) + "\n"


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
    host_section = sections.get("host")
    host = parse_host_lines(host_section.body) if host_section else {}
    if engine.status == "absent":
        return NodeStatus(node.name, node.role, container, "absent", host=host)
    owner_section = sections.get("owner")
    owner_state, owner_container = owner_record(owner_section.first_line if owner_section and owner_section.ok else "")
    now_section = sections.get("now")
    now = float(now_section.first_line) if now_section and now_section.ok else None
    started_s = docker_time(engine.started_at)
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
        host=host,
    )


def head_health(run: NodeRun, path: str = "/health") -> Health:
    """Pure: the head's /health code and served models from its script's output."""
    if run.ssh_failed:
        return Health(None, (), "no ssh", path)
    sections = parse_sections(run.stdout)
    code, health_error = _http_code(sections.get("health", Section(-1, "")))
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
    if code is None:
        error = health_error
    last = sections.get("last_start", Section(-1, "")).first_line.partition("\t")[2]
    container = sections.get("supervisor_container")
    supervisor = "" if container is None else (container.first_line.strip() if container.ok else "absent")
    live, _ = _http_code(sections.get("live"))
    answer, answer_error = _http_code(sections.get("answer"))
    if answer_error == CURL_ERRORS[28]:
        answer_error = f"no answer within {ANSWER_SECONDS} s"
    return Health(
        code,
        models,
        error,
        path=path,
        last_start=last,
        supervisor=supervisor,
        live=live,
        answer=answer,
        answer_error=answer_error,
    )


def _http_code(section: Section | None) -> tuple[int | None, str]:
    """Pure: a `curl -w '%{http_code}'` section -> (its code, or None with why: '' when it was not asked)."""
    if section is None:
        return None, ""
    code = int(section.first_line) if section.first_line.isdigit() else 0
    if code:
        return code, ""
    return None, CURL_ERRORS.get(section.rc) or section.first_line or "no answer"


def supervisor_report(run: NodeRun) -> SupervisorReport | None:
    """Pure: the supervisor's state file as the head's script printed it (None: none, or no supervisor)."""
    section = parse_sections(run.stdout).get("supervisor") if not run.ssh_failed else None
    return SupervisorReport.parse(section.body) if section is not None and section.ok else None


@dataclass(frozen=True)
class GroupReading:
    """What one group's reading of its nodes found (`collect_stack`)."""

    statuses: list[NodeStatus]
    health: Health | None
    supervised: SupervisorReport | None
    observations: dict[str, NodeObservation]
    """The program's own probe of each node read (spark_llm.plan.observation), for the weights' drift."""
    history: list[StartRecord]
    """The head's last starts (spark_llm.group.history), where the canary's record is."""


def reading(plan: DeploymentPlan, runs: dict[str, NodeRun]) -> GroupReading:
    """Pure: one group's reading from what its part of each node's script printed."""
    statuses = [node_status(node, plan.container, runs[node.name]) for node in plan.nodes]
    head = runs[plan.head.name]
    observations = {}
    for node in plan.nodes:
        run = runs[node.name]
        probe = parse_sections(run.stdout).get("probe") if not run.ssh_failed else None
        if probe is not None:
            observations[node.name] = parse_probe(node.name, probe.body)
        else:
            observations[node.name] = NodeObservation(node.name, error="no reading")
    history = parse_sections(head.stdout).get("history") if not head.ssh_failed else None
    return GroupReading(
        statuses,
        head_health(head, health_path(plan.engine)),
        supervisor_report(head),
        observations,
        parse_history(history.body) if history is not None and history.ok else [],
    )


def collect_stack(stack: StackPlan, timeout: float = 60) -> tuple[dict[str, GroupReading], RouterStatus | None]:
    """Every group's reading of every node, in one ssh session a node for all of them (the nodes in parallel): each
    model's reading by its name, and the router's status (None: the stack has no router)."""
    plans = list(stack.models.values())

    def read_node(node: NodePlan) -> dict[int, NodeRun]:
        parts = [
            (i, node_script(plan, member, stack.router if i == 0 and member.role == "head" else None))
            for i, plan in enumerate(plans)
            for member in plan.nodes
            if member.name == node.name
        ]
        run = run_on(node.ssh, grouped_script(parts), timeout=timeout)
        if run.ssh_failed:
            return {i: run for i, _ in parts}
        found = split_probe(run.stdout)
        return {i: replace(run, stdout=found.get(i, "")) for i, _ in parts}

    nodes = stack.nodes
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        by_node = dict(zip((n.name for n in nodes), pool.map(read_node, nodes), strict=True))
    readings = {
        plan.model_name: reading(plan, {n.name: by_node[n.name][i] for n in plan.nodes}) for i, plan in enumerate(plans)
    }
    gateway = None
    if stack.router is not None:
        head = by_node[plans[0].head.name][0]
        expected = tuple(sorted(stack.models))
        gateway = router_status(head, stack.router, expected, stack.router.endpoint)
    return readings, gateway


def collect(
    plan: DeploymentPlan, timeout: float = 60
) -> tuple[list[NodeStatus], Health | None, SupervisorReport | None]:
    """One group's container statuses (its nodes in parallel), its head's health and what the supervisor did."""
    seen = collect_stack(StackPlan.one(plan), timeout)[0][plan.model_name]
    return seen.statuses, seen.health, seen.supervised
