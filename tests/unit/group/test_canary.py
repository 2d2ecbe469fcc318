"""The canary, pure: its request, reading the head's answer, what changed, and finding the record for a revision."""

from __future__ import annotations

import json

import pytest

from spark_llm.group.canary import (
    CANARY_MAX_TOKENS,
    CANARY_PROMPT,
    CanaryRecord,
    after_restart,
    changes,
    describe,
    parse_answer,
    recorded_canary,
    request_body,
)

RECORD = CanaryRecord(" four, five, six,", "rev-a", ("spark-1", "spark-2"), "2026-12-03T04:00:00+00:00")


def test_the_request_is_the_fixed_prompt_at_temperature_0():
    assert request_body("m") == {
        "model": "m",
        "prompt": CANARY_PROMPT,
        "max_tokens": CANARY_MAX_TOKENS,
        "temperature": 0,
    }
    assert (CANARY_PROMPT, CANARY_MAX_TOKENS) == ("Count from one to ten: one, two, three,", 8)


@pytest.mark.parametrize(
    ("output", "answer", "error"),
    [
        (json.dumps({"choices": [{"text": " four, five,"}]}) + " HTTP200", " four, five,", ""),
        ('{"message": "no such model"} HTTP404', "", 'HTTP 404: {"message": "no such model"}'),
        (
            "curl: (7) Failed to connect to 127.0.0.1 port 8000 HTTP000",
            "",
            "HTTP 000: curl: (7) Failed to connect to 127.0.0.1 port 8000",
        ),
        ("garbage HTTP200", "", "not a completion: 'garbage'"),
        ("(could not ask: ssh exit 255)", "", "no HTTP answer: '(could not ask: ssh exit 255)'"),
    ],
    ids=["answer", "http-error", "nothing-listens", "not-json", "no-http"],
)
def test_the_heads_curl_output_reads_as_an_answer_or_an_error(output, answer, error):
    assert parse_answer(output) == (answer, error)


@pytest.mark.parametrize(
    ("now", "found"),
    [
        (RECORD, []),
        (CanaryRecord(" four, five, six,", "rev-a", ("spark-2", "spark-1"), "later"), []),  # order and time: no change
        (CanaryRecord(" seven eight", "rev-a", RECORD.nodes, "later"), ["answer"]),
        (CanaryRecord(" four, five, six,", "rev-a", ("spark-1",), "later"), ["node set"]),
        (CanaryRecord(" four, five, six,", "rev-b", RECORD.nodes, "later"), ["revision"]),
        (CanaryRecord("", "rev-b", ("spark-1",), "later", "HTTP 503: x"), ["answer", "node set", "revision"]),
    ],
    ids=["same", "same-reordered", "answer", "node-set", "revision", "all"],
)
def test_changes_name_what_differs(now, found):
    assert changes(RECORD, now) == found


def _timeline(revision: str, answer: str | None) -> dict:
    record = CanaryRecord(answer, revision, ("spark-1",), "t").to_json() if answer is not None else None
    return {"revision": revision, "nodes": {}, **({"canary": record} if record else {})}


def test_the_record_for_a_revision_is_its_latest():
    timelines = [
        _timeline("rev-a", "old"),
        _timeline("rev-b", "b"),
        _timeline("rev-a", "new"),
        _timeline("rev-c", None),
    ]
    assert recorded_canary("rev-a", timelines).answer == "new"
    assert recorded_canary("rev-b", timelines).answer == "b"


def test_a_revision_without_a_record_gets_the_newest_so_the_revision_change_shows():
    found = recorded_canary("rev-z", [_timeline("rev-a", "a"), _timeline("rev-b", "b")])
    assert found is not None and found.revision == "rev-b"
    assert "revision" in changes(found, CanaryRecord("b", "rev-z", ("spark-1",), "t"))


def test_no_record_before_the_canary_existed():
    assert recorded_canary("rev-a", [_timeline("rev-a", None), {}, {"canary": "garbage"}]) is None
    assert recorded_canary("rev-a", []) is None


def test_a_record_survives_json():
    assert CanaryRecord.from_json(json.loads(json.dumps(RECORD.to_json()))) == RECORD


def test_describe_shows_what_answered_and_the_answer():
    assert (
        describe(RECORD) == "revision rev-a, nodes spark-1, spark-2, at 2026-12-03T04:00:00+00:00: ' four, five, six,'"
    )
    assert describe(CanaryRecord("", "r", (), "t", "HTTP 503: x")).endswith(": no answer (HTTP 503: x)")


def gate(answer: str, revision: str = "rev-a") -> dict:
    """A start record the readiness gate wrote, with its canary."""
    canary = {**RECORD.to_json(), "answer": answer, "revision": revision}
    return {"revision": revision, "at": "2026-12-03T04:00:00+00:00", "canary": canary}


def by_supervisor(answer: str, revision: str = "rev-a") -> dict:
    return {**gate(answer, revision), "by": "supervisor"}


def test_the_gates_record_is_the_one_compared_with_not_a_later_restarts():
    """A supervisor's restart that answers differently must show as a change in `spark-llm status`, not become the
    answer compared with (issue 41, 1: the agent records the canary of each start it makes)."""
    found = recorded_canary("rev-a", [gate(" four, five, six,"), by_supervisor(" banana")])
    assert found is not None and found.answer == " four, five, six,"
    # A revision no gate recorded (its record lost): the supervisor's is better than none.
    found = recorded_canary("rev-b", [gate(" four,", "rev-a"), by_supervisor(" five,", "rev-b")])
    assert found is not None and (found.answer, found.revision) == (" five,", "rev-b")


def answer(text: str) -> str:
    return json.dumps({"choices": [{"text": text}]}) + " HTTP200"


def test_a_restart_that_answers_as_its_gate_did_says_nothing_and_is_recorded():
    record, said = after_restart(
        answer(" four, five, six,"), "rev-a", ["spark-1", "spark-2"], [gate(" four, five, six,")]
    )
    assert said == "" and record.answer == " four, five, six," and record.nodes == ("spark-1", "spark-2")
    assert record.to_json()["revision"] == "rev-a" and record.at


def test_a_restart_that_answers_otherwise_or_not_at_all_is_said_with_both_answers():
    _, said = after_restart(answer(" banana"), "rev-a", ["spark-1"], [gate(" four, five, six,")])
    assert said.startswith("the canary answers ' banana' after the restart; the start by `pulumi up` answered")
    assert "' four, five, six,'" in said and "the same revision answers differently" in said
    record, said = after_restart("no answer within 30 s (timed out)", "rev-a", ["spark-1"], [gate(" four,")])
    assert record.error and said.startswith("the canary got no answer after the restart (no HTTP answer")
    # No gate's record of this revision: nothing to compare with.
    assert after_restart(answer(" x"), "rev-b", ["spark-1"], [gate(" four,")])[1] == ""
