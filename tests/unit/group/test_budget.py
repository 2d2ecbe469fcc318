"""The supervisor's restart budget (spark_llm.group.budget): the window, the backoff, the give-up."""

from __future__ import annotations

import pytest

from spark_llm.group.budget import next_step

BUDGET = {"max_restarts": 3, "window_seconds": 600, "backoff_seconds": 10}


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
    assert next_step(restarts, now, BUDGET) == step  # type: ignore[arg-type]
