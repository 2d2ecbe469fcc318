"""When the supervisor brings the router back (spark-llm:router): pure, standard library only (shipped to the head
with the group's room). The router is no member: nothing of the engine group is judged, stopped or started for it.

A router is acted on only once this supervisor has seen it running (before that, `pulumi up` is still making it),
and only after it has been gone or stopped for the spec's grace (`pulumi up` replaces it, delete then create,
within seconds: the supervisor must not make one under its feet).
"""

from __future__ import annotations

from spark_llm.group.members import ABSENT

RUNNING = "running"
# The label a router the supervisor made carries: `pulumi up` removes such a one before it makes its own
# (components.router, `{name}-clear`).
LABEL_RESTORED = "spark-llm.router.restored"


class RouterWatch:
    """What to do about the router, poll by poll: None, `start` (a stopped container) or `create` (a removed one)."""

    def __init__(self, grace_seconds: float) -> None:
        self.grace = grace_seconds
        self.seen_running = False
        self.down_since: float | None = None

    def action(self, status: str, now: float) -> str | None:
        """`status`: the container's status (`running`, `exited`, ...) or ABSENT; `now`: a monotonic time."""
        if status == RUNNING:
            self.seen_running, self.down_since = True, None
            return None
        if not self.seen_running:
            return None
        if self.down_since is None:
            self.down_since = now
        if now - self.down_since < self.grace:
            return None
        self.down_since = None  # acted on: a new grace before the next attempt
        return "create" if status == ABSENT else "start"
