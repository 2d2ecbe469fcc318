"""The readiness gate after rank 0's first answer (spark_llm.remote.readiness): the canary unanswered (`settle`),
and the start's probation (`probation`, spark-llm:rollout.probationSeconds).

A start is not over at its first answer: a revision may answer once and then hang (an NCCL collective, a scheduler),
or crash a minute in. Past the gate, only the supervisor would see it, and it restarts the same revision within its
budget: the same wedge, three times. Held inside the gate, such a failure is a failed start like any other: a record
in the head's history, every node's lines, and rollout.onFailure (with `rollback`, the revision that served before
serves again on its own weights, which stay kept on every node until a start passes its probation).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from spark_llm.group.wedge import WedgeWatch
from spark_llm.plan.readiness import ReadinessSpec
from spark_llm.remote import gate_probe
from spark_llm.remote.gate_failures import (
    GroupNotReadyError,
    Member,
    exited_message,
    redacted_tails,
    state_text,
    wedged_message,
)
from spark_llm.remote.start_watch import MemberLog, first_stopped, poll

PROGRESS_SECONDS = 30.0
"""How often a probation says how far it is (one may last minutes: `up` must not look hung)."""


def _stopped(spec: ReadinessSpec, members: list[Member], logs: list[MemberLog], when: str) -> None:
    """GroupNotReadyError when a member's engine container is no longer running."""
    stopped = first_stopped(logs)
    if stopped is None:
        return
    failed = next(m for m in members if m.name == stopped.name)
    tails = redacted_tails(members, spec["container"], spec["api_key"] or None)
    raise GroupNotReadyError(exited_message(members, failed, state_text(stopped.engine), tails, when))


def _answers(spec: ReadinessSpec, members: list[Member], watch: WedgeWatch, when: str = "") -> bool:
    """Ask rank 0 once: whether it answered; GroupNotReadyError once the wedge bound passed without an answer."""
    head = next(m for m in members if m.role == "head")
    probe = gate_probe.ask(head.ssh, spec)
    if wedged := gate_probe.note(watch, probe, answered_before=True):
        tails = redacted_tails(members, spec["container"], spec["api_key"] or None)
        raise GroupNotReadyError(wedged_message(members, head, wedged, True, tails, when))
    return probe.answered


def settle(
    spec: ReadinessSpec,
    members: list[Member],
    logs: list[MemberLog],
    watch: WedgeWatch | None,
    say: Callable,
    canary_sent: float,
) -> None:
    """After rank 0 answered once and then not the canary: probe until it answers again (the start stands), a member
    stops, or the wedge bound passes with no answer (GroupNotReadyError, wedged)."""
    if watch is None:
        return
    head = next(m for m in members if m.role == "head")
    say(f"[{head.name}] no answer to the canary: asking again, for up to {watch.bound:g} s (supervisor.wedgeSeconds)")
    watch.not_answered(canary_sent, True, "no answer to the canary")
    while True:
        poll(logs)
        _stopped(spec, members, logs, "while the group was starting")
        if _answers(spec, members, watch):
            say(f"[{head.name}] rank 0 answers again")
            return
        time.sleep(gate_probe.POLL_SECONDS)


def probation(
    spec: ReadinessSpec,
    members: list[Member],
    logs: list[MemberLog],
    watch: WedgeWatch | None,
    say: Callable,
    answered_at: float,
) -> None:
    """spark-llm:rollout.probationSeconds after rank 0's first answer (`answered_at`, a time.time()): every poll, each
    member must still run; rank 0 is asked as the supervisor asks it (every third of the wedge bound, every poll once
    it goes unanswered). A member that stops, or the wedge bound passing without an answer, fails the start
    (GroupNotReadyError). It ends once the probation is over and rank 0's last probe was answered."""
    seconds = spec.get("probation_seconds") or 0.0
    if seconds <= 0:
        return
    head = next(m for m in members if m.role == "head")
    ends = answered_at + seconds
    say(
        f"[{head.name}] probation: {seconds:g} s from rank 0's first answer (spark-llm:rollout.probationSeconds);"
        " a member that stops or a rank 0 that stops answering fails this start"
    )
    said_at = answered_at
    while True:
        poll(logs)
        now = time.time()
        when = f"{now - answered_at:.0f} s after rank 0's first answer, within the start's probation ({seconds:g} s)"
        _stopped(spec, members, logs, when)
        if watch is not None and watch.due(now):
            _answers(spec, members, watch, when + ", ")
        now = time.time()
        if now >= ends and (watch is None or watch.since is None):
            say(f"[{head.name}] probation passed: every member ran and rank 0 answered for {seconds:g} s")
            return
        if now - said_at >= PROGRESS_SECONDS:
            said_at = now
            unanswered = f"; rank 0 unanswered since {now - watch.since:.0f} s" if watch and watch.since else ""
            say(f"[{head.name}] probation: {now - answered_at:.0f} of {seconds:g} s, every member runs{unanswered}")
        time.sleep(gate_probe.POLL_SECONDS)
