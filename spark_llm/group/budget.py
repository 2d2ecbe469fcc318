"""The supervisor's restart budget: how many restarts a window allows, and how long the next one waits."""

from __future__ import annotations

from collections.abc import Sequence

from spark_llm.group.records import Budget, RestartRecord


def recent(attempts: Sequence[RestartRecord], now: float, budget: Budget) -> list[RestartRecord]:
    """The restarts that started within the budget's window."""
    return [a for a in attempts if now - a["started"] < budget["window_seconds"]]


def next_step(attempts: Sequence[RestartRecord], now: float, budget: Budget) -> tuple[str, float]:
    """("restart", seconds to wait first) or ("give_up", 0): the budget's answer to a group found broken.

    The first restart in the window waits nothing; the n-th waits `backoff_seconds * 2**(n-2)` after the previous
    one ended (10 s, 20 s, 40 s, ... by default); `max_restarts` in the window and the next is a give-up.
    """
    within = recent(attempts, now, budget)
    if len(within) >= budget["max_restarts"]:
        return "give_up", 0.0
    if not within:
        return "restart", 0.0
    wait = budget["backoff_seconds"] * 2 ** (len(within) - 1)
    last_end = max(a.get("ended") or a["started"] for a in within)
    return "restart", max(0.0, last_end + wait - now)
