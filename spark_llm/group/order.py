"""The order the group stops and starts in, for `pulumi up` (components.engine_group), the supervisor and the words
`spark-llm status` and preview print.

A worker's engine joins the head's rendezvous, and the head's process group dies with any rank: so the head stops
first (no rank is left waiting on a member that is going), the workers stop last rank first, the workers start in
rank order and the head starts last, once every worker it will wait for is up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def stop_order(members: Sequence[T]) -> list[T]:
    """`members` in rank order (the head first) -> the order they stop in: head, then workers last rank first."""
    return [*members[:1], *reversed(members[1:])]


def start_order(members: Sequence[T]) -> list[T]:
    """`members` in rank order (the head first) -> the order they start in: workers in rank order, head last."""
    return [*members[1:], *members[:1]]


def restart_steps(names: Sequence[str]) -> list[str]:
    """Member names in rank order -> the ordered restart in words: `head stopped, ..., head started`."""
    return [f"{n} stopped" for n in stop_order(names)] + [f"{n} started" for n in start_order(names)]
