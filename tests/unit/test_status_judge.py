"""`spark-llm status`: when is a deployed group whole, and when does `pulumi up` restart it in order."""

from __future__ import annotations

import pytest

from spark_llm.ops.status import judge_group

REV = "0123456789abcdef"
HEAD = f"running aaa 2026-11-30T10:00:05.000000000Z {REV}"
WORKER = f"running bbb 2026-11-30T10:00:01.000000000Z {REV}"


@pytest.mark.parametrize(
    ("statuses", "problem"),
    [
        ({"head": HEAD, "w1": WORKER}, None),
        ({"head": HEAD, "w1": "absent"}, "w1 is absent"),
        ({"head": HEAD, "w1": "exited 1 bbb"}, "w1 is exited 1 bbb"),
        ({"head": "exited 137 aaa", "w1": WORKER}, "head is exited 137"),
        ({"head": HEAD, "w1": "unreachable (ssh: timeout)"}, "w1 is unreachable"),
        ({"head": HEAD, "w1": WORKER.replace(REV, "ffffffffffffffff")}, "w1 runs group revision ffffffffffffffff"),
        ({"head": HEAD, "w1": WORKER.replace("10:00:01", "10:09:00")}, "w1 restarted after the head"),
        ({"head": HEAD, "w1": WORKER, "w2": WORKER.replace("10:00:01", "10:00:09")}, "w2 restarted after the head"),
    ],
    ids=["whole", "absent", "exited", "head-exited", "unreachable", "old-revision", "worker-restarted", "one-of-two"],
)
def test_judge_group(statuses, problem):
    verdict = judge_group(statuses, "head", REV)
    if problem is None:
        assert verdict is None
    else:
        assert verdict is not None and problem in verdict
