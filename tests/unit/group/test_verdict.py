"""The group's verdict: one table of cases, and each caller (preview, status, the supervisor) passing it through its
own entry. The callers read the members their own way; the rule they apply is spark_llm.group.verdict.judge."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from spark_llm.group import members as verdict_members
from spark_llm.group import verdict
from spark_llm.group.verdict import BROKEN, WAIT, WHOLE
from spark_llm.ops.status import command as status
from spark_llm.ops.status.read import NodeStatus
from spark_llm.plan import drift
from spark_llm.plan.container import LABEL_GENERATION
from spark_llm.plan.observation import EngineState, NodeObservation
from tests.unit.group.supervisor_program import load

program = load("supervisor_program_verdict")

ROLLOUT = "g1"


@dataclass(frozen=True)
class M:
    """A member as a case states it; each caller's test turns it into what that caller reads."""

    name: str
    status: str = "running"
    started: str = "2026-12-03T10:00:01Z"
    finished: str = ""
    exit_code: int = 0
    oom: bool = False
    error: str = ""
    rollout: str = ROLLOUT
    foreign: bool = False

    @property
    def role(self) -> str:
        return "head" if self.name == "head" else "worker"


HEAD = M("head", started="2026-12-03T10:00:05Z")


@dataclass(frozen=True)
class Case:
    id: str
    members: tuple[M, ...]
    restart: str
    """The verdict with the restart policy (preview, status)."""
    supervise: str
    """The verdict with the supervisor's policy."""
    phrases: tuple[str, ...] = ()
    """What the problems say (each a substring of one), with the restart policy."""
    culprits: tuple[str, ...] = ()
    by_caller: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Phrases where a caller compares differently (rollouts: preview among members, status against the config)."""


CASES = [
    Case("whole", (HEAD, M("w1")), WHOLE, WHOLE),
    Case("whole-three", (HEAD, M("w1"), M("w2", started="2026-12-03T10:00:04.999999999Z")), WHOLE, WHOLE),
    Case(
        "worker-exited-for-memory",
        (HEAD, M("w1", status="exited", exit_code=137, oom=True)),
        BROKEN,
        BROKEN,
        ("w1's engine container is exited (exit code 137, killed for memory)",),
        ("w1",),
    ),
    Case(
        "head-exited",
        (M("head", status="exited", exit_code=1), M("w1")),
        BROKEN,
        BROKEN,
        ("head's engine container is exited (exit code 1)",),
        ("head",),
    ),
    Case(
        "both-exited",
        (M("head", status="exited", exit_code=1), M("w1", status="exited", exit_code=1)),
        BROKEN,
        BROKEN,
        ("head's engine container is exited", "w1's engine container is exited"),
        ("head", "w1"),
    ),
    Case(
        # The worker died first; the head's rank died of waiting for it: the worker is named first.
        "worker-died-first-the-head-followed",
        (
            M("head", status="exited", exit_code=1, finished="2026-12-03T10:05:00.45Z"),
            M("w1", status="exited", exit_code=137, finished="2026-12-03T10:05:00.05Z"),
        ),
        BROKEN,
        BROKEN,
        ("w1's engine container is exited (exit code 137); head's", "(exit code 1, 0.4 s after w1's)"),
        ("w1", "head"),
    ),
    Case(
        # Issue 41, 7: the worker rebooted. Its Docker engine recorded its container at boot (exit 255), seconds
        # after the head's rank died of waiting for it: the worker is named first all the same.
        "worker-rebooted-the-head-followed",
        (
            M("head", status="exited", exit_code=1, finished="2026-12-03T10:05:00.45Z"),
            M("w1", status="exited", exit_code=255, finished="2026-12-03T10:05:31.00Z"),
        ),
        BROKEN,
        BROKEN,
        (
            "w1's engine container is exited (exit code 255: w1 went down, a reboot or power loss); head's",
            "(exit code 1)",
        ),
        ("w1", "head"),
    ),
    Case(
        "created-not-started",
        (HEAD, M("w1", status="created")),
        BROKEN,
        BROKEN,
        ("w1's engine container is created",),
        ("w1",),
    ),
    Case("worker-absent", (HEAD, M("w1", status="absent")), BROKEN, WAIT, ("w1 has no engine container",), ("w1",)),
    Case("head-absent", (M("head", status="absent"), M("w1")), BROKEN, WAIT, ("head has no engine container",)),
    Case(
        "worker-unreachable",
        (HEAD, M("w1", status="unreachable", error="ssh: no route to host")),
        BROKEN,
        WAIT,
        ("w1 could not be read", "no route to host"),
        ("w1",),
    ),
    Case(
        "worker-of-another-deployment",
        (HEAD, M("w1", foreign=True)),
        BROKEN,
        WAIT,
        ("w1's engine was started by another",),
        ("w1",),
    ),
    Case(
        # Docker trims the fraction's trailing zeros: as strings "05Z" sorts after "05.5Z"; as times it is earlier.
        "worker-started-after-the-head",
        (HEAD, M("w1", started="2026-12-03T10:00:05.5Z")),
        BROKEN,
        BROKEN,
        ("w1's engine container restarted after the head's",),
        ("w1",),
    ),
    Case(
        "one-of-two-workers-after-the-head",
        (HEAD, M("w1"), M("w2", started="2026-12-03T10:00:09Z")),
        BROKEN,
        BROKEN,
        ("w2's engine container restarted after the head's",),
        ("w2",),
    ),
    Case(
        # Only the head's death is named: a worker's start time says nothing while the head is down.
        "head-exited-worker-later",
        (M("head", status="exited", exit_code=1), M("w1", started="2026-12-03T10:00:09Z")),
        BROKEN,
        BROKEN,
        ("head's engine container is exited",),
        ("head",),
    ),
    Case(
        "worker-of-another-rollout",
        (HEAD, M("w1", rollout="g2")),
        BROKEN,
        WHOLE,  # the supervisor knows its containers by ID, not by label
        by_caller={
            "preview": ("the members' containers belong to different rollouts",),
            "status": ("w1 runs revision g2, the config gives g1",),
        },
    ),
]
IDS = [c.id for c in CASES]


def members(case: Case) -> list[verdict.Member]:
    return [
        verdict.Member(
            m.name,
            m.role,
            m.status,
            exit_code=m.exit_code,
            started_at=m.started,
            finished_at=m.finished,
            oom_killed=m.oom,
            error=m.error,
            rollout=m.rollout,
            foreign="another state of this stack" if m.foreign else "",
        )
        for m in case.members
    ]


def assert_says(problems: str | list[str] | tuple[str, ...], phrases: tuple[str, ...]) -> None:
    text = problems if isinstance(problems, str) else "; ".join(problems)
    for phrase in phrases:
        assert phrase in text, (phrase, text)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_verdict(case: Case):
    found = verdict.judge(members(case), verdict.RESTART)
    assert found.state == case.restart
    assert_says(found.problems, case.phrases or case.by_caller.get("preview", ()))
    if case.culprits:
        assert found.culprits == case.culprits
    assert (found.state == WHOLE) == (found.problems == ())
    assert verdict.judge(members(case), verdict.SUPERVISE).state == case.supervise


# ---------- preview: spark_llm.plan.drift.group_generation, from the program's probe ----------


def observation(m: M) -> NodeObservation:
    if m.status == "unreachable":
        return NodeObservation(node=m.name, error=m.error)
    labels = {LABEL_GENERATION: m.rollout}
    engine = EngineState(m.status, m.exit_code, f"id-{m.name}", m.started, labels, m.finished, oom_killed=m.oom)
    return NodeObservation(node=m.name, engine=engine, run="run-1")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_preview_passes_the_table(case: Case):
    observations = {m.name: observation(m) for m in case.members}
    others = [m.name for m in case.members if m.foreign]
    generation, why = drift.group_generation(observations, [(m.name, m.role) for m in case.members], others)
    if case.restart == WHOLE:
        assert (generation, why) == (ROLLOUT, None)
    else:
        assert generation.startswith(drift.REPAIR_PREFIX) and why is not None
        assert_says(why, case.phrases or case.by_caller["preview"])


# ---------- status: spark_llm.ops.status.command.differences, from what each node's script printed ----------


def node_status(m: M) -> NodeStatus:
    if m.status == "unreachable":
        return NodeStatus(m.name, m.role, "engine", "unreachable", error=m.error)
    if m.status == "absent":
        return NodeStatus(m.name, m.role, "engine", "absent")
    return NodeStatus(
        m.name,
        m.role,
        "engine",
        m.status,
        exit_code=None if m.status == "running" else m.exit_code,
        started_at=m.started,
        finished_at=m.finished,
        revision=m.rollout,
        oom_killed=m.oom,
        owner="another-state" if m.foreign else "this-state",
    )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_status_passes_the_table(case: Case):
    plan = SimpleNamespace(group_revision=ROLLOUT)
    found = status.differences(plan, [node_status(m) for m in case.members], "this-state")  # type: ignore[arg-type]
    assert (found == []) == (case.restart == WHOLE)
    assert_says(found, case.phrases or case.by_caller.get("status", ()))


# ---------- the supervisor: its own reads (the head's Docker socket, the workers' ssh) into the verdict ----------


def inspect(m: M) -> dict:
    state = {
        "Status": m.status,
        "ExitCode": m.exit_code,
        "StartedAt": m.started,
        "FinishedAt": m.finished,
        "OOMKilled": m.oom,
    }
    return {"Id": ("other-" if m.foreign else "") + f"id-{m.name}", "State": state}


# The head's Docker socket's answers: 404 for no such container, 500 for a Docker engine in trouble.
HEAD_ANSWERS = {"absent": (404, b"{}"), "unreachable": (500, b"")}


def supervisor_of(case: Case, tmp_path) -> object:
    spec = {
        "deployment": "d",
        "revision": ROLLOUT,
        "container": "engine",
        "members": [
            {
                "name": m.name,
                "role": m.role,
                "address": "10.0.0.1",
                "user": "u",
                "port": 22,
                "container_id": f"id-{m.name}",
            }
            for m in case.members
        ],
        "docker_socket": "/nonexistent.sock",
        "key_path": "/k",
        "known_hosts": "/kh",
        "ssh_options": [],
        "wedge_seconds": 180,
        "model": "m",
        "state_path": str(tmp_path / "state.json"),
        "weights_record": str(tmp_path / "weights"),
        "memory": {"engine": "sglang", "version": "0.5.23", "flags": [], "container": "engine", "ranks": 2},
        "meminfo": str(tmp_path / "meminfo"),
    }
    supervisor = program.Supervisor(spec)
    for node, m in zip(supervisor.members, case.members, strict=True):
        if m.role == "head":
            node._api = lambda method, path, timeout=30, m=m: HEAD_ANSWERS.get(
                m.status, (200, json.dumps(inspect(m)).encode())
            )
        else:
            results = {
                "absent": (1, "", "Error: No such object: engine"),
                "unreachable": (255, "", m.error),
            }
            code, out, err = results.get(m.status, (0, json.dumps([inspect(m)]), ""))
            node._remote = lambda command, timeout=60, c=code, o=out, e=err: subprocess.CompletedProcess([], c, o, e)
    return supervisor


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_supervisor_passes_the_table(case: Case, tmp_path):
    found, _ = supervisor_of(case, tmp_path).verdict()  # type: ignore[attr-defined]
    assert found.state == case.supervise
    if case.supervise == BROKEN:
        assert_says(found.problems, case.phrases)
        assert found.culprits == case.culprits


def test_every_caller_applies_the_one_rule():
    assert drift.judge is verdict.judge
    assert status.judge is verdict.judge
    assert program.judge is verdict.judge


# OpenSSH's words on a worker whose host key changed, as the supervisor's ssh prints them (abridged).
CHANGED_KEY = """@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
Add correct host key in /spark-llm-supervisor/known_hosts to get rid of this message.
Offending ED25519 key in /spark-llm-supervisor/known_hosts:2
  remove with:
  ssh-keygen -f "/spark-llm-supervisor/known_hosts" -R "[10.0.0.1]:22"
Host key for 10.0.0.1 has changed and you have requested strict checking.
Host key verification failed.
"""


def test_a_refused_host_key_is_relayed_in_our_words_not_opensshs_advice(tmp_path):
    """The supervisor's reading of a worker whose host key changed (issue 31, 10): what `spark-llm status` relays
    names the node and the pin to keep, not a known_hosts path inside the supervisor's container to edit."""
    case = next(c for c in CASES if any(m.status == "unreachable" and m.role == "worker" for m in c.members))
    supervisor = supervisor_of(case, tmp_path)
    worker = next(n for n in supervisor.members if n.role == "worker")  # type: ignore[attr-defined]
    worker._remote = lambda command, timeout=60: subprocess.CompletedProcess([], 255, "", CHANGED_KEY)
    error = worker.read().error
    assert "ssh-keygen" not in error and "/spark-llm-supervisor" not in error
    assert f"{worker.name}'s host key is not the pinned one" in error and "hostKey" in error


def test_other_ssh_failures_are_relayed_as_ssh_said_them_last():
    refused = "ssh: connect to host 10.0.0.1 port 22: No route to host"
    said = f"Warning: Permanently added 'x' (ED25519) to the list of known hosts.\n{refused}\n"
    assert verdict_members.ssh_failure("worker-1", said) == refused
