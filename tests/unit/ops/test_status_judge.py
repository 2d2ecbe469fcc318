"""`spark-llm status`: when is a deployed group whole, and when does `pulumi up` restart it in order.

Judged from each member's container as the program's probe reads it (NodeStatus), never from `launch.sh status`.
"""

from __future__ import annotations

import dataclasses

import pytest

from spark_llm.ops.status import NodeStatus, differences

REV = "0123456789abcdef"
HEAD = NodeStatus("head", "head", "engine", "running", started_at="2026-11-30T10:00:05.000000000Z", revision=REV)
WORKER = NodeStatus("w1", "worker", "engine", "running", started_at="2026-11-30T10:00:01.000000000Z", revision=REV)


def worker(name: str = "w1", **changes: object) -> NodeStatus:
    return dataclasses.replace(WORKER, node=name, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("statuses", "problem"),
    [
        ([HEAD, WORKER], None),
        ([HEAD, worker(state="absent")], "w1 has no engine container"),
        ([HEAD, worker(state="exited", exit_code=1)], "w1 exited (1)"),
        ([dataclasses.replace(HEAD, state="exited", exit_code=137), WORKER], "head exited (137)"),
        ([HEAD, worker(state="unreachable", error="ssh: timeout")], "w1 is unreachable"),
        ([HEAD, worker(revision="ffffffffffffffff")], "w1 runs revision ffffffffffffffff"),
        ([HEAD, worker(started_at="2026-11-30T10:09:00Z")], "w1 restarted after the head"),
        ([HEAD, WORKER, worker("w2", started_at="2026-11-30T10:00:09Z")], "w2 restarted after the head"),
    ],
    ids=["whole", "absent", "exited", "head-exited", "unreachable", "old-revision", "worker-restarted", "one-of-two"],
)
def test_group_differences(statuses, problem):
    plan = type("Plan", (), {"head": type("Head", (), {"name": "head"})(), "group_revision": REV})()
    found = differences(plan, statuses)  # type: ignore[arg-type]
    if problem is None:
        assert found == []
    else:
        assert any(problem in phrase for phrase in found), found
