"""The readiness gate after rank 0's first answer (spark_llm.remote.after_answer): a canary left unanswered, and the
start's probation (spark-llm:rollout.probationSeconds): a revision that wedges or crashes a minute in is a failed
start, before `pulumi up` ends (issue 41, 4)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from spark_llm.plan.observation import EngineState
from spark_llm.remote import after_answer, gate_failures, gate_probe, readiness
from spark_llm.remote.gate_probe import Probe, wedge_watch
from spark_llm.remote.readiness import GroupNotReadyError
from tests.unit.remote.test_gate_probe import CONNECTION, spec, unanswered

WORKER = {**CONNECTION, "name": "worker-1", "host": "w"}


def group_spec(**more) -> dict:
    base = spec(**more)
    worker = {"name": "worker-1", "role": "worker", "connection": WORKER, "script_path": "/s", "fabric_address": ""}
    return {**base, "members": [*base["members"], worker]}


@dataclass
class Stopped:
    name: str
    engine: EngineState


class Clock:
    """time.time() for the gate's modules, moved on by sleep and by each probe (one takes `probe_s`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, probe_s: float = 1.0) -> None:
        self.now = 1_000_000.0
        self.probe_s = probe_s
        for module in (after_answer, gate_probe):
            monkeypatch.setattr(module.time, "time", lambda: self.now)
        monkeypatch.setattr(after_answer.time, "sleep", self.sleep)
        monkeypatch.setattr(gate_failures, "log_tails", lambda members, container: {m.name: "a line" for m in members})
        monkeypatch.setattr(after_answer, "poll", lambda logs: None)

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def asks(monkeypatch: pytest.MonkeyPatch, clock: Clock, answer_until: float) -> list[float]:
    """Rank 0 answers every probe sent before `answer_until`, none after; the times asked are returned."""
    asked: list[float] = []

    def ask(head, the_spec) -> Probe:
        sent = clock.now
        asked.append(sent)
        clock.now += clock.probe_s
        if sent < answer_until:
            return Probe(sent, "{} HTTP200", 200, 4)
        return unanswered(sent, 200)

    monkeypatch.setattr(gate_probe, "ask", ask)
    return asked


def test_a_start_that_answered_once_and_then_never_again_fails_as_wedged_within_the_bound(monkeypatch):
    """The gate's settle after a canary with no answer: a revision that answers its first request and then wedges is
    a failed start, named so, with every node's lines, once the bound has passed: not a start that passes."""
    clock = Clock(monkeypatch, probe_s=4)
    asks(monkeypatch, clock, answer_until=0)
    monkeypatch.setattr(after_answer, "first_stopped", lambda logs: None)
    the_spec = spec()
    said: list[str] = []
    with pytest.raises(GroupNotReadyError) as err:
        after_answer.settle(the_spec, readiness._members(the_spec), [], wedge_watch(the_spec), said.append, clock.now)
    first = str(err.value).splitlines()[0]
    assert first.startswith("head (head): after its first answer, the start is wedged: rank 0 has answered no"), first
    assert "---- head (head): last 30 lines ----\na line" in str(err.value)
    assert said == ["[head] no answer to the canary: asking again, for up to 12 s (supervisor.wedgeSeconds)"]


def test_a_start_whose_canary_went_unanswered_stands_once_rank_0_answers_again(monkeypatch):
    answers = iter([unanswered(time.time(), 200), Probe(time.time(), "{} HTTP200", 200, 4)])
    monkeypatch.setattr(gate_probe, "ask", lambda head, spec: next(answers))
    monkeypatch.setattr(after_answer, "poll", lambda logs: None)
    monkeypatch.setattr(after_answer, "first_stopped", lambda logs: None)
    monkeypatch.setattr(after_answer.time, "sleep", lambda s: None)
    the_spec = spec()
    said: list[str] = []
    after_answer.settle(the_spec, readiness._members(the_spec), [], wedge_watch(the_spec), said.append, time.time())
    assert said[-1] == "[head] rank 0 answers again"


def test_without_a_probation_the_gate_ends_at_the_first_answer_and_asks_nothing_more(monkeypatch):
    clock = Clock(monkeypatch)
    asked = asks(monkeypatch, clock, answer_until=float("inf"))
    for the_spec in (group_spec(), group_spec(probation_seconds=0)):
        said: list[str] = []
        members = readiness._members(the_spec)
        after_answer.probation(the_spec, members, [], wedge_watch(the_spec), said.append, clock.now)
        assert said == [] and asked == []


def test_a_start_that_keeps_answering_passes_its_probation_asked_every_third_of_the_wedge_bound(monkeypatch):
    clock = Clock(monkeypatch)
    asked = asks(monkeypatch, clock, answer_until=float("inf"))
    monkeypatch.setattr(after_answer, "first_stopped", lambda logs: None)
    the_spec = group_spec(probation_seconds=30)
    watch = wedge_watch(the_spec)
    assert watch is not None
    answered_at = clock.now
    watch.answered(answered_at)
    said: list[str] = []
    after_answer.probation(the_spec, readiness._members(the_spec), [], watch, said.append, answered_at)
    assert said[0] == (
        "[head] probation: 30 s from rank 0's first answer (spark-llm:rollout.probationSeconds); a member that stops"
        " or a rank 0 that stops answering fails this start"
    )
    assert said[-1] == "[head] probation passed: every member ran and rank 0 answered for 30 s"
    assert len(said) == 2  # no progress line within 30 s
    assert 30 <= clock.now - answered_at <= 30 + 2 * gate_probe.POLL_SECONDS
    # A probe is a generation (a line in the engine's access log): one per third of the 12 s bound, not per poll.
    gaps = [b - a for a, b in zip([answered_at, *asked], asked, strict=False)]
    assert len(asked) in (6, 7, 8) and min(gaps) >= 4, gaps


def test_a_member_that_stops_within_the_probation_fails_the_start_naming_it_and_when(monkeypatch):
    clock = Clock(monkeypatch)
    asks(monkeypatch, clock, answer_until=float("inf"))
    answered_at = clock.now
    crashed = Stopped("worker-1", EngineState("exited", exit_code=1))
    monkeypatch.setattr(after_answer, "first_stopped", lambda logs: crashed if clock.now - answered_at >= 10 else None)
    the_spec = group_spec(probation_seconds=30)
    with pytest.raises(GroupNotReadyError) as err:
        after_answer.probation(the_spec, readiness._members(the_spec), [], wedge_watch(the_spec), print, answered_at)
    first = str(err.value).splitlines()[0]
    assert first == (
        "worker-1 (worker): engine container is exited (exit code 1) 10 s after rank 0's first answer, within the"
        " start's probation (30 s)."
    )
    assert "---- worker-1 (worker): last 30 lines ----\na line" in str(err.value)


def test_a_rank_0_that_stops_answering_within_the_probation_fails_the_start_once_the_wedge_bound_passed(monkeypatch):
    clock = Clock(monkeypatch)
    answered_at = clock.now
    asks(monkeypatch, clock, answer_until=answered_at + 5)  # answers the probe at +4, none after
    monkeypatch.setattr(after_answer, "first_stopped", lambda logs: None)
    the_spec = group_spec(probation_seconds=60)
    watch = wedge_watch(the_spec)
    assert watch is not None
    watch.answered(answered_at)
    with pytest.raises(GroupNotReadyError) as err:
        after_answer.probation(the_spec, readiness._members(the_spec), [], watch, print, answered_at)
    first = str(err.value).splitlines()[0]
    assert first.startswith("head (head): ") and ", within the start's probation (60 s), the start is wedged: " in first
    # The bound (12 s) after the last answer, not the probation's end.
    assert 12 <= clock.now - (answered_at + 4) <= 12 + 2 * gate_probe.POLL_SECONDS + 2 * clock.probe_s, clock.now


def test_a_probation_that_ends_during_unanswered_probes_waits_for_an_answer_or_the_wedge(monkeypatch):
    clock = Clock(monkeypatch)
    answered_at = clock.now
    # Rank 0 answers nothing from +20 s to +28 s, then answers again: the probation (24 s) ends only after that.
    answers = {"gap": (answered_at + 20, answered_at + 28)}

    def ask(head, the_spec) -> Probe:
        sent = clock.now
        clock.now += 1
        low, high = answers["gap"]
        return unanswered(sent, 200) if low <= sent < high else Probe(sent, "{} HTTP200", 200, 4)

    monkeypatch.setattr(gate_probe, "ask", ask)
    monkeypatch.setattr(after_answer, "first_stopped", lambda logs: None)
    the_spec = group_spec(probation_seconds=24)
    watch = wedge_watch(the_spec)
    assert watch is not None
    watch.answered(answered_at)
    said: list[str] = []
    after_answer.probation(the_spec, readiness._members(the_spec), [], watch, said.append, answered_at)
    assert clock.now - answered_at >= 28 and said[-1].startswith("[head] probation passed")


def test_a_long_probation_says_how_far_it_is_every_30_s(monkeypatch):
    clock = Clock(monkeypatch)
    asks(monkeypatch, clock, answer_until=float("inf"))
    monkeypatch.setattr(after_answer, "first_stopped", lambda logs: None)
    the_spec = group_spec(probation_seconds=100)
    watch = wedge_watch(the_spec)
    assert watch is not None
    watch.answered(clock.now)
    said: list[str] = []
    after_answer.probation(the_spec, readiness._members(the_spec), [], watch, said.append, clock.now)
    progress = said[1:-1]
    assert [line.split(" of ")[0] for line in progress] == [
        "[head] probation: 30",
        "[head] probation: 60",
        "[head] probation: 90",
    ], said
    assert all(line.endswith(" of 100 s, every member runs") for line in progress), progress
