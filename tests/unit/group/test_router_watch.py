"""When the supervisor brings the router back (spark_llm.group.router): only a router it has seen running, only once
it has been gone or stopped for its grace (`pulumi up` replaces it within seconds), made again when removed,
started when stopped; and a new grace before the next attempt."""

from __future__ import annotations

import pytest

from spark_llm.group.router import RouterWatch

GRACE = 30.0


@pytest.mark.parametrize(
    ("seen", "expected"),
    [
        # Never seen running: `pulumi up` is still making it.
        ([("absent", 0), ("absent", 100)], [None, None]),
        # Removed by hand: made again once gone for the grace, not before.
        ([("running", 0), ("absent", 10), ("absent", 39), ("absent", 40)], [None, None, None, "create"]),
        # Stopped (a `docker stop`, which its restart policy leaves stopped): started again.
        ([("running", 0), ("exited", 5), ("exited", 35)], [None, None, "start"]),
        # Replaced by `pulumi up` within the grace: back running, nothing done.
        ([("running", 0), ("absent", 1), ("created", 2), ("running", 3), ("absent", 4)], [None] * 5),
        # After an attempt, a new grace before the next one.
        (
            [("running", 0), ("absent", 1), ("absent", 31), ("absent", 32), ("absent", 61)],
            [None, None, "create", None, None],
        ),
    ],
)
def test_the_router_is_brought_back_only_after_its_grace_and_only_once_seen(seen, expected) -> None:
    watch = RouterWatch(GRACE)
    assert [watch.action(status, now) for status, now in seen] == expected
