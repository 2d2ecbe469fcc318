"""spark_llm.group.weights: the group starts only on weights verified on every member (issue 31, 2); and the
supervisor's own reads of the records (the head's mount, a worker's allow-listed request) into that rule."""

from __future__ import annotations

import json
import subprocess

import pytest

from spark_llm.group.memory import MEMORY_REQUEST
from spark_llm.group.weights import RECORD_REQUEST, UNVERIFIED, parse_record, weights_problem
from spark_llm.plan import drift
from tests.unit.group.supervisor_program import load

program = load("supervisor_program_weights")

DIGEST = "a" * 64
OTHER = "b" * 64
VERIFIED = f"repair-0123456789ab {DIGEST}\n"
CUT_SHORT = f"{UNVERIFIED} -\n"
REMEDY = "pulumi up copies and verifies them, then restarts the group"


@pytest.mark.parametrize(
    ("records", "says"),
    [
        ([("head", VERIFIED), ("worker-1", VERIFIED)], None),
        ([("head", "t1 " + DIGEST), ("worker-1", "t2 " + DIGEST), ("worker-2", "t3 " + DIGEST)], None),
        # The head of a `model.source` kind head elsewhere records `DIGEST/SOURCE`: its weights' digest is the first.
        ([("head", f"t1 {DIGEST}/{OTHER}"), ("worker-1", VERIFIED)], None),
        ([("head", VERIFIED)], None),  # a head alone
        ([("head", VERIFIED), ("worker-1", CUT_SHORT)], "weights on worker-1 are not verified (a copy was cut short)"),
        ([("head", CUT_SHORT), ("worker-1", VERIFIED)], "weights on head are not verified (a copy was cut short)"),
        ([("head", VERIFIED), ("worker-1", None)], "weights on worker-1 have no record"),
        ([("head", None), ("worker-1", VERIFIED)], "weights on head have no record"),
        ([("head", VERIFIED), ("worker-1", "")], "weights on worker-1 have an unreadable record"),
        ([("head", VERIFIED), ("worker-1", "garbage")], "weights on worker-1 have an unreadable record"),
        ([("head", VERIFIED), ("worker-1", f"t {OTHER}")], f"weights on worker-1 ({OTHER[:12]}) are not those on head"),
        (
            [("head", VERIFIED), ("worker-1", VERIFIED), ("worker-2", f"t {OTHER}/x")],
            "weights on worker-2 (bbbbbbbbbbbb) are not those on head (aaaaaaaaaaaa)",
        ),
    ],
    ids=[
        "verified-same",
        "three-members",
        "head-records-its-source-too",
        "head-alone",
        "worker-cut-short",
        "head-cut-short",
        "worker-no-record",
        "head-no-record",
        "empty-record",
        "one-word-record",
        "another-digest",
        "another-digest-on-the-second-worker",
    ],
)
def test_the_rule(records, says):
    found = weights_problem(records)
    if says is None:
        assert found is None
    else:
        assert found is not None and found.startswith(says), found
        assert found.endswith(REMEDY)


def test_the_first_member_at_fault_is_named_in_rank_order():
    found = weights_problem([("head", VERIFIED), ("worker-1", CUT_SHORT), ("worker-2", None)])
    assert found is not None and "worker-1" in found and "worker-2" not in found


def test_the_record_is_the_one_the_weights_steps_write():
    """`TOKEN VALUE` (spark_llm.plan.drift.record_token_script), `unverified -` the fan-out's mark, spelled once."""
    assert drift.UNVERIFIED is UNVERIFIED
    record = parse_record(CUT_SHORT)
    assert record is not None and record.token == UNVERIFIED and record.digest == "-"
    assert parse_record(None) is None and parse_record("a b c") is None


# ---------- the supervisor: its reads of the records (the head's mount, a worker's request) ----------


def supervisor_of(tmp_path, head_record: str | None, worker: tuple[int, str, str]):
    """The program with a head and a worker: the head's record a file (None: absent), the worker's ssh stubbed to
    answer `worker` (exit code, stdout, stderr) and to record what it was asked."""
    record = tmp_path / "records" / "weights"
    record.parent.mkdir()
    if head_record is not None:
        record.write_text(head_record)
    spec = {
        "deployment": "d",
        "revision": "r",
        "container": "engine",
        "members": [
            {"name": n, "role": r, "address": "10.0.0.1", "user": "u", "port": 22, "container_id": f"id-{n}"}
            for n, r in (("head", "head"), ("worker-1", "worker"))
        ],
        "docker_socket": "/nonexistent.sock",
        "key_path": "/k",
        "known_hosts": "/kh",
        "ssh_options": [],
        "poll_seconds": 1,
        "wedge_seconds": 180,
        "model": "m",
        "budget": {"max_restarts": 3, "window_seconds": 600, "backoff_seconds": 0},
        "state_path": str(tmp_path / "state.json"),
        "weights_record": str(record),
        "memory": {"engine": "vllm", "version": "0.16.0", "flags": [], "container": "engine", "ranks": 2},
        "meminfo": str(tmp_path / "meminfo"),
    }
    (tmp_path / "meminfo").write_text(
        f"MemTotal: {121 * 1024**2} kB\nMemFree: {115 * 1024**2} kB\nMemAvailable: 0 kB\n"
    )
    supervisor = program.Supervisor(spec)
    asked: list[str] = []

    def remote(command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        asked.append(command)
        return subprocess.CompletedProcess([], *worker)

    supervisor.members[1]._remote = remote
    return supervisor, asked


def test_the_supervisor_reads_the_heads_record_from_its_mount_and_asks_the_worker_with_the_one_request(tmp_path):
    supervisor, asked = supervisor_of(tmp_path, VERIFIED, (0, VERIFIED, ""))
    assert supervisor.weights_held() is None
    assert asked == [RECORD_REQUEST]


@pytest.mark.parametrize(
    ("head", "worker", "says"),
    [
        (VERIFIED, (0, CUT_SHORT, ""), "weights on worker-1 are not verified (a copy was cut short): " + REMEDY),
        (None, (0, VERIFIED, ""), "weights on head have no record"),
        # The allow script's answer for a node without a record.
        (VERIFIED, (3, "", "spark-llm: no weights record on this node"), "weights on worker-1 have no record"),
        (VERIFIED, (255, "", "ssh: connect to host 10.0.0.1 port 22: No route to host"), "the weights record on"),
        # A worker whose allow script predates the request refuses it: waited for, never taken for verified.
        (VERIFIED, (126, "", "spark-llm: the supervisor's key may only run ..."), "the weights record on worker-1"),
    ],
    ids=["worker-cut-short", "head-without-record", "worker-without-record", "worker-unreachable", "refused"],
)
def test_the_supervisor_holds_the_group_on_what_it_read(tmp_path, head, worker, says):
    supervisor, _ = supervisor_of(tmp_path, head, worker)
    held = supervisor.weights_held()
    assert held is not None and held.startswith(says), held


class PolledOnceError(Exception):
    """Raised by the stubbed sleep: the loop ran one poll."""


def one_poll_of_a_broken_group(supervisor, asked: list[str], answers: dict[str, str], monkeypatch) -> tuple[list, dict]:
    """Both members' engines exited; the worker answers `answers[request]` (else its container's inspect). One poll
    of the loop: what it stopped or started, and the state it wrote."""
    exited = {"Status": "exited", "ExitCode": 137, "StartedAt": "2026-12-03T10:00:01Z"}
    exited["FinishedAt"] = "2026-12-03T10:05:00Z"
    supervisor.members[0]._api = lambda method, path, timeout=30: (200, json.dumps({"Id": "id-head", "State": exited}))
    worker_inspect = json.dumps([{"Id": "id-worker-1", "State": exited}])
    acted: list[str] = []
    for member in supervisor.members:
        member.act = lambda verb, name=member.name: acted.append(f"{name} {verb}") or ""

    def remote(command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        asked.append(command)
        return subprocess.CompletedProcess([], 0, answers.get(command, worker_inspect), "")

    supervisor.members[1]._remote = remote

    def sleep(seconds: float) -> None:
        raise PolledOnceError

    monkeypatch.setattr(program.time, "sleep", sleep)
    with pytest.raises(PolledOnceError):
        supervisor.run()
    return acted, json.loads(open(supervisor.spec["state_path"]).read())


def test_a_broken_group_on_unverified_weights_is_not_started_and_the_state_says_why(tmp_path, monkeypatch):
    """The story of issue 31, 2: a copy killed midway, then a reboot; the supervisor used to start the group."""
    supervisor, asked = supervisor_of(tmp_path, VERIFIED, (0, CUT_SHORT, ""))
    acted, state = one_poll_of_a_broken_group(supervisor, asked, {RECORD_REQUEST: CUT_SHORT}, monkeypatch)
    assert acted == []  # nothing stopped, nothing started
    assert state["waiting"] == f"weights on worker-1 are not verified (a copy was cut short): {REMEDY}"
    assert state["restarts"] == []  # no restart spent of its budget
    assert RECORD_REQUEST in asked and MEMORY_REQUEST not in asked  # held on the weights: the memory not read


def test_a_broken_group_is_not_restarted_into_a_node_whose_memory_cannot_hold_its_engine(tmp_path, monkeypatch):
    """Issue 32, 1: a worker's engine died and left 50 GiB held by another process; the supervisor used to restart
    the group into it (and fail at the engine's start, a restart of its budget spent). Now it waits, saying why."""
    supervisor, asked = supervisor_of(tmp_path, VERIFIED, (0, VERIFIED, ""))
    gib_kb = 1024**2
    worker_memory = (
        f"mem-info\tMemTotal={121 * gib_kb} MemFree={60 * gib_kb} MemAvailable={60 * gib_kb}\n"
        f"mem-gpu\t=4242:{50 * 1024}:old-vllm \n"
    )
    answers = {RECORD_REQUEST: VERIFIED, MEMORY_REQUEST: worker_memory}
    acted, state = one_poll_of_a_broken_group(supervisor, asked, answers, monkeypatch)
    assert acted == []  # nothing stopped, nothing started
    assert state["waiting"].startswith("memory admission worker-1: refused: needs 108.9 GiB")
    assert "stop the leftover process 4242 in container old-vllm (50.0 GiB)" in state["waiting"]
    assert "memory admission head" not in state["waiting"]  # the head's mounted meminfo: 115 GiB free
    assert state["restarts"] == []  # no restart spent of its budget
    assert MEMORY_REQUEST in asked
