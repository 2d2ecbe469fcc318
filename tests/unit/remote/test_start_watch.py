"""spark_llm.remote.start_watch: a member's log read across polls, its progress lines, a stall named by its bound."""

from __future__ import annotations

import json
import subprocess

import pytest

from spark_llm.plan.hosts import SshHost
from spark_llm.plan.start.timeline import TIMELINE_PREFIX, parse_timeline
from spark_llm.remote.start_watch import (
    MemberLog,
    first_stopped,
    poll_script,
    progress,
    stall_bound,
    stalled,
    take,
    waited_for,
)

HOST = SshHost(name="n", host="127.0.0.1", port=22, user="root", key_path="/k", host_key="ssh-ed25519 AAAA")
RUNNING = 'engine\t{"status": "running", "exit_code": 0, "container_id": "c1", "labels": {}}'


def member(role: str = "worker") -> MemberLog:
    return MemberLog("worker-1", role, HOST, "sglang", "spark-llm-engine")


def log(stamp: str, text: str) -> str:
    return f"log\t{stamp} {text}"


def test_a_line_docker_returns_again_at_the_cursor_is_read_once():
    """`docker logs --since T` includes the lines written at T: they were read by the poll before."""
    m = member()
    t1, t2 = "2026-12-02T10:00:01.000000001Z", "2026-12-02T10:00:02.000000002Z"
    take(m, "\n".join([RUNNING, log(t1, "[x TP1] Init torch distributed begin."), log(t2, "a"), log(t2, "b")]), 100.0)
    take(m, "\n".join([RUNNING, log(t2, "a"), log(t2, "b"), log(t2, "c")]), 105.0)
    assert [(line.text, line.received) for line in m.lines] == [
        ("[x TP1] Init torch distributed begin.", 100.0),
        ("a", 100.0),
        ("b", 100.0),
        ("c", 105.0),  # only the new line carries the new receive time: the others keep their first
    ]


def test_a_new_container_starts_its_log_afresh_and_a_progress_bar_counts_as_its_last_state():
    m = member()
    take(m, "\n".join([RUNNING, log("2026-12-02T10:00:01Z", "old")]), 1.0)
    replaced = RUNNING.replace('"c1"', '"c2"')
    take(m, "\n".join([replaced, log("2026-12-02T09:00:00Z", "Loading 10%\rLoading 50%\rLoading 90%")]), 2.0)
    assert [line.text for line in m.lines] == ["Loading 90%"]
    assert m.container_id == "c2"


def test_poll_script_reads_the_state_then_the_lines_since_the_cursor_on_a_real_bash(tmp_path):
    """The script as a node runs it, with a `docker` that answers like one."""
    (tmp_path / "docker").write_text(
        "#!/bin/bash\n"
        'case "$1" in\n'
        "  version) echo 20.10 ;;\n"
        '  inspect) echo \'{"status": "running", "exit_code": 0, "container_id": "c9", "labels": {}}\' ;;\n'
        f'  logs) echo "$@" > {tmp_path}/args\n'
        '    printf "2026-12-02T10:00:03Z Loading 10%%\\rone\\n2026-12-02T10:00:04Z two\\n" ;;\n'
        "esac\n"
    )
    (tmp_path / "docker").chmod(0o755)
    m = member()
    m.cursor = "2026-12-02T10:00:02Z"
    out = subprocess.run(
        ["bash", "-c", poll_script(m)], capture_output=True, text=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin"}
    )
    assert (tmp_path / "args").read_text() == "logs --timestamps --since 2026-12-02T10:00:02Z spark-llm-engine\n"
    take(m, out.stdout, 50.0)
    assert m.engine.container_id == "c9" and [line.text for line in m.lines] == ["one", "two"]


def test_progress_says_each_phase_as_it_passes_and_every_ten_seconds_in_between():
    m = member()
    said: list[str] = []
    take(
        m,
        "\n".join([RUNNING, log("2026-12-02T10:00:01Z", "[2026-12-02 10:00:01 TP1] Init torch distributed begin.")]),
        100.0,
    )
    progress(m, m.start(), 100.0, said.append)
    progress(m, m.start(), 105.0, said.append)  # same phase, 5 s later: nothing
    progress(m, m.start(), 111.0, said.append)  # 11 s later: again
    take(
        m,
        "\n".join(
            [
                RUNNING,
                log("2026-12-02T10:00:03Z", "[2026-12-02 10:00:03 TP1] Init torch distributed ends. mem usage=0.00 GB"),
                log("2026-12-02T10:00:03Z", "[2026-12-02 10:00:03 TP1] Load weight begin. avail mem=10 GB"),
            ]
        ),
        112.0,
    )
    progress(m, m.start(), 112.0, said.append)
    assert said[0].startswith("[worker-1] distributed init ") and "Init torch distributed begin." in said[0]
    assert len(said) == 3
    assert said[2].startswith("[worker-1] weight loading ") and "(after distributed init 2.0 s)" in said[2]


def test_a_quiet_phase_past_its_bound_is_a_stall_named_with_its_hint():
    m = member()
    take(
        m,
        "\n".join([RUNNING, log("2026-12-02T10:00:01Z", "[2026-12-02 10:00:01 TP1] Init torch distributed begin.")]),
        100.0,
    )
    start = m.start()
    assert stalled(m, start, 115.0, 20, []) is None
    found = stalled(m, start, 121.0, 20, [])
    assert found is not None and (found.member, found.phase, found.bound) == ("worker-1", "dist_init", 20.0)
    assert "NCCL_SOCKET_IFNAME" in found.hint


def test_the_bound_is_the_phase_default_or_twice_its_longest_earlier_start():
    assert stall_bound("sglang", "weights", head=True, override=None, history=[]) == 1800.0
    assert stall_bound("sglang", "weights", head=True, override=None, history=[{"weights": 1200.0}]) == 2400.0
    assert stall_bound("sglang", "weights", head=True, override=30, history=[{"weights": 1200.0}]) == 30.0


def test_the_gate_output_carries_the_timeline_for_the_stack_output():
    timeline = {"revision": "r1", "nodes": {"head": [{"phase": "dist_init", "seconds": 1.5}]}}
    stdout = "[head] started: ...\n" + TIMELINE_PREFIX + json.dumps(timeline) + "\n"
    assert parse_timeline(stdout) == timeline
    assert parse_timeline("") == {} and parse_timeline(None) == {}


def test_status_shows_the_last_starts_phases_per_node():
    from spark_llm.plan.start.timeline import timeline_lines

    timeline = {
        "revision": "0123456789abcdef",
        "profile": "sglang",
        "at": "2026-12-02T18:00:00+00:00",
        "gate_seconds": 4.2,
        "nodes": {
            "head": [{"phase": "dist_init", "seconds": 1.25}, {"phase": "weights", "seconds": 3.0}],
            "worker-1": [{"phase": "dist_init", "seconds": 1.0}],
        },
    }
    assert timeline_lines(timeline) == [
        "last start: revision 0123456789ab at 2026-12-02T18:00:00+00:00, rank 0 answered 4.2 s into the readiness gate",
        "  head: distributed init 1.2 s, weight loading 3.0 s",
        "  worker-1: distributed init 1.0 s",
    ]
    assert timeline_lines({}) == []


def test_a_line_written_before_the_first_poll_is_as_old_as_the_nodes_clock_says():
    """The worker's "begin" line, written 12 s before the gate first looked, is 12 s old on this machine's clock
    too, whatever the node's clock reads: the worker that went quiet first is named first."""
    m = member()
    # The node's `date` in that poll: 2026-12-02T10:00:13Z; this machine's clock reads 3605.0 (far from it).
    take(m, "\n".join([RUNNING, "now\t1796205613.0", log("2026-12-02T10:00:01Z", "begin")]), 3605.0)
    assert m.lines[0].received == pytest.approx(3605.0 - 12.0)


def test_http_access_lines_are_not_progress():
    """The gate's own completion request, answered 503 while the engine starts, must not keep a stall quiet."""
    m = member("head")
    begin = "[2026-12-02 10:00:01] Capture cuda graph begin. This can take up to several minutes. avail mem=1 GB"
    access = 'INFO:     127.0.0.1:40312 - "POST /v1/completions HTTP/1.1" 503 Service Unavailable'
    take(m, "\n".join([RUNNING, log("2026-12-02T10:00:01Z", begin), log("2026-12-02T10:00:30Z", access)]), 100.0)
    assert [line.text for line in m.lines] == [begin]


def _state(status: str, finished: str = "", code: int = 0, started: str = "2026-12-02T10:00:00Z") -> str:
    state = {"status": status, "exit_code": code, "container_id": "c", "labels": {}, "finished_at": finished}
    state["started_at"] = started
    return "engine\t" + json.dumps(state)


def test_a_member_that_died_waiting_names_the_hung_one_it_waited_for():
    """Issue 31, 4: the head's engine exits when its own rendezvous timeout runs out; the worker it waited for, still
    running and quiet in distributed init, is the culprit, not the head."""
    head, worker = MemberLog("head", "head", HOST, "sglang", "e"), member()
    begin = "Init torch distributed begin."
    take(worker, "\n".join([RUNNING, log("2026-12-02T10:00:01Z", f"[2026-12-02 10:00:01 TP1] {begin}")]), 100.0)
    take(
        head,
        "\n".join(
            [
                _state("exited", "2026-12-02T10:01:03Z", 1),
                log("2026-12-02T10:00:02Z", f"[2026-12-02 10:00:02 TP0] {begin}"),
                log("2026-12-02T10:01:02Z", "torch.distributed.DistStoreError: Timed out after 60 seconds waiting"),
            ]
        ),
        100.0,
    )
    assert first_stopped([head, worker]) is head
    found = waited_for(head, [head, worker], 160.0, rendezvous=60.0)
    assert found is not None and found[0] is worker and found[1].phase == "dist_init"


def test_a_member_that_crashed_in_distributed_init_did_not_die_of_waiting():
    """A traceback a second after the phase began is a crash, not a timeout: the crashed member is the culprit even
    though the others still wait in distributed init (found on the sim: STANDIN_CRASH_AT_INIT on the worker)."""
    head, worker = MemberLog("head", "head", HOST, "sglang", "e"), member()
    begin = "Init torch distributed begin."
    take(head, "\n".join([RUNNING, log("2026-12-02T10:00:01Z", f"[2026-12-02 10:00:01 TP0] {begin}")]), 100.0)
    take(
        worker,
        "\n".join(
            [
                _state("exited", "2026-12-02T10:00:02Z", 1),
                log("2026-12-02T10:00:01Z", f"[2026-12-02 10:00:01 TP1] {begin}"),
                log("2026-12-02T10:00:02Z", "[2026-12-02 10:00:02 TP1] Scheduler hit an exception: Traceback"),
            ]
        ),
        100.0,
    )
    assert first_stopped([head, worker]) is worker
    assert waited_for(worker, [head, worker], 130.0, rendezvous=600.0) is None


def test_a_member_that_crashed_on_its_own_is_its_own_culprit_and_the_first_to_stop_leads():
    head, worker = MemberLog("head", "head", HOST, "sglang", "e"), member()
    take(worker, "\n".join([_state("exited", "2026-12-02T10:00:05Z", 1), log("2026-12-02T10:00:04Z", "boom")]), 100.0)
    take(head, "\n".join([_state("exited", "2026-12-02T10:00:09Z", 1), log("2026-12-02T10:00:08Z", "x")]), 100.0)
    assert first_stopped([head, worker]) is worker  # the worker stopped 4 s before the head
    head_weights = MemberLog("head", "head", HOST, "sglang", "e")
    take(
        head_weights,
        "\n".join(
            [
                _state("exited", "2026-12-02T10:00:09Z", 1),
                log("2026-12-02T10:00:08Z", "[2026-12-02 10:00:08 TP0] Load weight begin. avail mem=100.00 GB"),
            ]
        ),
        100.0,
    )
    running_worker = member()
    take(running_worker, RUNNING, 100.0)
    assert (
        waited_for(head_weights, [head_weights, running_worker], 120.0, rendezvous=600.0) is None
    )  # not a wait: its own crash
