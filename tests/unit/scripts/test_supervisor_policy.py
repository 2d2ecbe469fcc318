"""scripts/supervisor.py, its pure part: when the group is healthy, and what the budget allows next."""

from __future__ import annotations

import importlib.util

import pytest

from spark_llm.plan.supervisor import PROGRAM

_spec = importlib.util.spec_from_file_location("supervisor_program", PROGRAM)
assert _spec is not None and _spec.loader is not None
program = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(program)

BUDGET = {"max_restarts": 3, "window_seconds": 600, "backoff_seconds": 10}


def member(name, status="running", started="2026-12-03T10:00:00Z", **extra):
    role = "head" if name == "head" else "worker"
    return {"name": name, "role": role, "status": status, "started_at": started, "exit_code": 0, **extra}


@pytest.mark.parametrize(
    ("members", "verdict", "why"),
    [
        ([member("head", started="2026-12-03T10:00:05Z"), member("w1")], "healthy", ""),
        (
            [member("head"), member("w1", status="exited", exit_code=137)],
            "unhealthy",
            "w1's engine exited (137)",
        ),
        (
            # Docker trims trailing zeros of the nanoseconds: "05.1Z" is later than "05.05Z", not earlier.
            [member("head", started="2026-12-03T10:00:05.05Z"), member("w1", started="2026-12-03T10:00:05.1Z")],
            "unhealthy",
            "w1's engine restarted after the head's",
        ),
        (
            [member("head"), member("w1", status="unreachable", error="no route")],
            "wait",
            "w1 does not answer (no route)",
        ),
        # A `pulumi up --replace` at work, or a container only `pulumi up` can put back: touch nothing.
        ([member("head"), member("w1", status="absent")], "wait", "w1 has no engine container"),
        ([member("head", id="b", expected_id="a"), member("w1")], "wait", "head's engine is another container"),
    ],
    ids=["healthy", "worker-exited", "worker-after-head", "unreachable-waits", "absent", "replaced-by-someone-else"],
)
def test_judge(members, verdict, why):
    got, reason = program.judge(members)
    assert got == verdict
    assert reason.startswith(why)


def record(started, ended=None):
    return {"started": started, "ended": ended if ended is not None else started + 5}


@pytest.mark.parametrize(
    ("restarts", "now", "step"),
    [
        ([], 1000.0, ("restart", 0.0)),
        ([record(900)], 1000.0, ("restart", 0.0)),  # 905 + 10 s is past
        ([record(995)], 1001.0, ("restart", 9.0)),  # the second waits 10 s after the first ended (1000)
        ([record(900), record(980)], 990.0, ("restart", 15.0)),  # the third 20 s after the second ended (985)
        ([record(100), record(900), record(980), record(990)], 1000.0, ("give_up", 0.0)),
        ([record(100), record(200), record(300)], 1000.0, ("restart", 0.0)),  # all outside the window
    ],
    ids=["first", "second-after-backoff", "second-waits", "third-doubles", "spent", "window-passed"],
)
def test_next_step_counts_the_window_and_doubles_the_backoff(restarts, now, step):
    assert program.next_step(restarts, now, BUDGET) == step


def test_parse_time_reads_dockers_times_and_its_zero_time():
    assert program.parse_time("2026-12-03T10:00:05.5Z") == pytest.approx(
        program.parse_time("2026-12-03T10:00:05Z") + 0.5
    )
    assert program.parse_time("0001-01-01T00:00:00Z") is None
