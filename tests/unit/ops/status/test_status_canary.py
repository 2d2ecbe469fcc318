"""`spark-llm status`'s canary: the same answer passes, a changed one exits 1 showing both, no record is a note,
and a group that is not in sync is not asked."""

from __future__ import annotations

import argparse
import json

import pytest

from spark_llm.group.canary import CanaryRecord
from spark_llm.ops.status import canary as status_canary
from spark_llm.ops.status import command as status
from spark_llm.ops.status.read import GroupReading
from tests.unit.ops.node_facts import REV, running, statuses, with_revision
from tests.unit.ops.status.conftest import reading

RECORDED = CanaryRecord(" four five six", REV, ("spark-1", "spark-2"), "2026-12-03T04:00:00+00:00")


def _now(answer: str = RECORDED.answer, *, nodes=RECORDED.nodes, revision: str = REV, error: str = "") -> CanaryRecord:
    return CanaryRecord(answer, revision, tuple(nodes), "2026-12-03T05:00:00+00:00", error)


@pytest.mark.parametrize(
    ("recorded", "now", "ok", "note"),
    [
        (RECORDED, _now(), True, "the same answer as at readiness"),
        (RECORDED, _now(" salted words"), False, "changed since readiness: answer"),
        (RECORDED, _now(nodes=("spark-1",)), False, "changed since readiness: node set"),
        (RECORDED, _now(error="HTTP 503: loading"), False, "no answer now: HTTP 503: loading"),
        (None, _now(), True, "no canary recorded at readiness"),
        (CanaryRecord("", REV, (), "t", "HTTP 500: x"), _now(), True, "the readiness gate recorded no answer"),
        (RECORDED, None, True, "not asked: the group is not in sync"),
    ],
    ids=["same", "answer", "node-set", "no-answer-now", "no-record", "gate-recorded-an-error", "not-asked"],
)
def test_the_canary_verdict(recorded, now, ok, note):
    check = status_canary.judge(recorded, now)
    assert check.ok is ok and check.note.startswith(note)


def test_a_changed_answer_shows_both_answers_and_what_answered():
    lines = status_canary.canary_lines(status_canary.judge(RECORDED, _now(" salted words")))
    assert lines[0] == "canary: changed since readiness: answer"
    assert (
        lines[1]
        == f"  recorded at readiness: revision {REV[:12]}, nodes spark-1, spark-2, at {RECORDED.at}: ' four five six'"
    )
    assert lines[2].startswith("  now:") and lines[2].endswith(": ' salted words'")


def test_the_same_answer_is_one_line():
    assert status_canary.canary_lines(status_canary.judge(RECORDED, _now())) == [
        f"canary: the same answer as at readiness of {RECORDED.at}: ' four five six' (revision {REV[:12]}, nodes"
        " spark-1, spark-2; asked again at 2026-12-03T05:00:00+00:00)"
    ]


@pytest.fixture
def in_sync(spark_plan, monkeypatch):
    """status.run on a group in sync; the canary's history and answer are what the test sets in `seen`."""
    plan = with_revision(spark_plan)
    nodes = statuses(plan, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    seen: dict = {"history": [], "outputs": {}, "answer": RECORDED.answer, "asked": 0}

    def collect_stack(stack, timeout):
        health = status.Health(200, (plan.model_name,))
        return {name: GroupReading(nodes, health, None, {}, seen["history"]) for name in stack.models}, None

    monkeypatch.setattr(status, "collect_stack", collect_stack)
    monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: seen["outputs"])

    def ask(head, asks):
        seen["asked"] += len(asks)
        return [_now(seen["answer"], nodes=a.nodes, revision=a.revision) for a in asks]

    monkeypatch.setattr(status, "ask_canaries", ask)
    return plan, seen


def _run(plan, *, as_json: bool) -> int:
    return status.run(None, plan, argparse.Namespace(json=as_json, timeout=5))


def test_status_exits_1_showing_both_answers_when_the_canary_changed(in_sync, capsys):
    plan, seen = in_sync
    seen["history"] = [{"revision": REV, "canary": RECORDED.to_json()}]
    seen["answer"] = " salted words"
    assert _run(plan, as_json=False) == 1
    out = capsys.readouterr().out
    assert "answers changed: every member runs revision" in out
    assert "' four five six'" in out and "' salted words'" in out

    assert _run(plan, as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "answers changed"
    assert report["canary"]["changes"] == ["answer"]
    assert (report["canary"]["recorded"]["answer"], report["canary"]["now"]["answer"]) == (
        " four five six",
        " salted words",
    )


def test_status_in_sync_with_the_same_answer_from_the_stack_output(in_sync, capsys):
    plan, seen = in_sync
    seen["outputs"] = {"start_timeline": {"revision": REV, "nodes": {}, "canary": RECORDED.to_json()}}
    assert _run(plan, as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "in sync" and report["canary"]["ok"]
    assert report["canary"]["now"]["nodes"] == ["spark-1", "spark-2"]


def test_a_group_started_before_the_canary_is_a_note_not_a_failure(in_sync, capsys):
    plan, _seen = in_sync
    assert _run(plan, as_json=False) == 0
    assert "canary: no canary recorded at readiness" in capsys.readouterr().out


def test_a_group_not_in_sync_is_not_asked(spark_plan, monkeypatch, capsys):
    plan = with_revision(spark_plan)
    nodes = statuses(plan, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z", revision="other"))
    monkeypatch.setattr(status, "collect_stack", reading(nodes, status.Health(200, (plan.model_name,))))
    monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: {})

    def never(*args, **kwargs):
        raise AssertionError("the canary was asked of a group in drift")

    monkeypatch.setattr(status, "ask_canaries", never)
    assert _run(plan, as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "drift" and report["canary"]["note"].startswith("not asked")
