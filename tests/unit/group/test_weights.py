"""spark_llm.group.weights: the group starts only on weights verified on every member (issue 31, 2)."""

from __future__ import annotations

import pytest

from spark_llm.group.weights import UNVERIFIED, parse_record, weights_problem
from spark_llm.plan import drift

DIGEST = "a" * 64
OTHER = "b" * 64
VERIFIED = f"repair-0123456789ab {DIGEST}\n"
CUT_SHORT = f"{UNVERIFIED} -\n"
REMEDY = "pulumi up copies and verifies them, then restarts the group"


@pytest.mark.parametrize(
    ("records", "says"),
    [
        ([("head", VERIFIED), ("worker-1", VERIFIED)], None),
        ([("head", "t1 " + DIGEST), ("worker-1", "t2 " + DIGEST), ("worker-2", "t3 " + DIGEST)], None),
        # The head of a `model.source` kind head elsewhere records `DIGEST/SOURCE`: its weights' digest is the first.
        ([("head", f"t1 {DIGEST}/{OTHER}"), ("worker-1", VERIFIED)], None),
        ([("head", VERIFIED)], None),  # a head alone
        ([("head", VERIFIED), ("worker-1", CUT_SHORT)], "weights on worker-1 are not verified (a copy was cut short)"),
        ([("head", CUT_SHORT), ("worker-1", VERIFIED)], "weights on head are not verified (a copy was cut short)"),
        ([("head", VERIFIED), ("worker-1", None)], "weights on worker-1 have no record"),
        ([("head", None), ("worker-1", VERIFIED)], "weights on head have no record"),
        ([("head", VERIFIED), ("worker-1", "")], "weights on worker-1 have an unreadable record"),
        ([("head", VERIFIED), ("worker-1", "garbage")], "weights on worker-1 have an unreadable record"),
        ([("head", VERIFIED), ("worker-1", f"t {OTHER}")], f"weights on worker-1 ({OTHER[:12]}) are not those on head"),
        (
            [("head", VERIFIED), ("worker-1", VERIFIED), ("worker-2", f"t {OTHER}/x")],
            "weights on worker-2 (bbbbbbbbbbbb) are not those on head (aaaaaaaaaaaa)",
        ),
    ],
    ids=[
        "verified-same",
        "three-members",
        "head-records-its-source-too",
        "head-alone",
        "worker-cut-short",
        "head-cut-short",
        "worker-no-record",
        "head-no-record",
        "empty-record",
        "one-word-record",
        "another-digest",
        "another-digest-on-the-second-worker",
    ],
)
def test_the_rule(records, says):
    found = weights_problem(records)
    if says is None:
        assert found is None
    else:
        assert found is not None and found.startswith(says), found
        assert found.endswith(REMEDY)


def test_the_first_member_at_fault_is_named_in_rank_order():
    found = weights_problem([("head", VERIFIED), ("worker-1", CUT_SHORT), ("worker-2", None)])
    assert found is not None and "worker-1" in found and "worker-2" not in found


def test_the_record_is_the_one_the_weights_steps_write():
    """`TOKEN VALUE` (spark_llm.plan.drift.record_token_script), `unverified -` the fan-out's mark, spelled once."""
    assert drift.UNVERIFIED is UNVERIFIED
    record = parse_record(CUT_SHORT)
    assert record is not None and record.token == UNVERIFIED and record.digest == "-"
    assert parse_record(None) is None and parse_record("a b c") is None
