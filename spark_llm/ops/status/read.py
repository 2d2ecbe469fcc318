"""What `spark-llm status` reads from each node, in one ssh session per node (all at once): the engine container
through the program's own container probe (spark_llm.plan.observation.ENGINE_STATE_FUNCTION), its owner record, the
node's clock; on the head also `/health` and `/v1/models` (curl on the head itself), the readiness gate's last word
on the configured revision, and the supervisor's state file. The parsers are pure; spark_llm.ops.status.command judges.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from spark_llm.group.history import last_start_probe
from spark_llm.group.serving import COMPLETIONS_PATH, health_path, serving_request
from spark_llm.group.times import docker_time
from spark_llm.group.wedge import LIVENESS_PATH, unanswered_while_live
from spark_llm.ops.sections import SECTION_FUNCTION, Section, parse_sections
from spark_llm.plan.container import LABEL_REVISION
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import OWNER_STEP, owner_record
from spark_llm.plan.host_record import host_probe, parse_host_lines
from spark_llm.plan.observation import ENGINE_STATE_FUNCTION, TOKENS_DIR, parse_probe
from spark_llm.plan.supervisor import SupervisorReport, state_path
from spark_llm.plan.supervisor import container_name as supervisor_container
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


def node_script(plan: DeploymentPlan, node: NodePlan) -> str:
    lines = [
        SECTION_FUNCTION + ENGINE_STATE_FUNCTION,
        f"capture engine engine_state {quote(plan.container)}",
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
        ]
        if plan.supervisor is not None:
            lines.append(f"capture supervisor cat {quote(state_path(node))}")
            fmt = quote("{{.State.Status}}")
            lines.append(f"capture supervisor_container docker inspect -f {fmt} {quote(supervisor_container(plan))}")
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


def collect(
    plan: DeploymentPlan, timeout: float = 60
) -> tuple[list[NodeStatus], Health | None, SupervisorReport | None]:
    """Every node's container status (in parallel), the head's health and what the supervisor did."""
    with ThreadPoolExecutor(max_workers=len(plan.nodes)) as pool:
        runs = list(pool.map(lambda n: run_on(n.ssh, node_script(plan, n), timeout=timeout), plan.nodes))
    statuses = [node_status(node, plan.container, r) for node, r in zip(plan.nodes, runs, strict=True)]
    return statuses, head_health(runs[0], health_path(plan.engine)), supervisor_report(runs[0])
