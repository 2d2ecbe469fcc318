"""`spark-llm status`: the group's verdict (in sync, drift, not deployed, unhealthy, failed_start) and what
`pulumi up` does about it, and the table (what it reads from the nodes: test_status_read.py)."""

from __future__ import annotations

import json

import pytest

from spark_llm.ops.render import render_text
from spark_llm.ops.status import command as status
from spark_llm.ops.status import read as status_read
from spark_llm.ops.status import report
from tests.unit.ops.node_facts import (
    ABSENT,
    REV,
    engine_section,
    node_run,
    running,
    statuses,
    with_revision,
)


def test_status_in_sync_when_every_member_runs_the_revision_and_the_head_started_last(spark_plan):
    p = with_revision(spark_plan)
    s = statuses(p, running("2026-11-30T10:00:05.5Z"), running("2026-11-30T10:00:01.123456789Z"))
    assert status.verdict(p, s, status.Health(200, (p.model_name,)))[0] == "in sync"


@pytest.mark.parametrize(
    ("owner", "verdict"),
    [
        ("ours abcdef0123456789", "in sync"),
        ("theirs abcdef0123456789", "drift"),
        ("theirs an-older-container", "in sync"),  # the record is of a container that is gone
    ],
    ids=["ours", "another-state", "stale-record"],
)
def test_status_names_an_engine_another_state_of_the_stack_started(spark_plan, owner, verdict):
    p = with_revision(spark_plan)
    runs = [
        node_run("spark-1", running("2026-11-30T10:00:05.5Z"), owner=(0, "ours abcdef0123456789")),
        node_run("spark-2", running("2026-11-30T10:00:01Z"), owner=(0, owner)),
    ]
    s = [status_read.node_status(n, "spark-llm-engine", r) for n, r in zip(p.nodes, runs, strict=True)]
    state, sentence = status.verdict(p, s, status.Health(200, (p.model_name,)), state_id="ours")
    assert state == verdict
    if verdict == "drift":
        assert sentence.startswith("spark-2's engine was started by another state of this stack: `pulumi up` restarts")


def test_status_says_drift_and_what_pulumi_up_does_for_an_exited_worker(spark_plan):
    p = with_revision(spark_plan)
    exited = (
        0,
        engine_section("exited", 137, "2026-11-30T10:00:01Z", "2026-11-30T10:30:00Z", REV, "abcdef012345", "false"),
    )
    s = statuses(p, running("2026-11-30T10:00:05Z"), exited)
    state, sentence = status.verdict(p, s, status.Health(200, (p.model_name,)))
    assert state == "drift"
    assert sentence == (
        "spark-2's engine container is exited (exit code 137): `pulumi up` restarts the group in order: "
        "spark-1 stopped, spark-2 stopped, spark-2 started, spark-1 started"
    )


@pytest.mark.parametrize(
    ("head", "worker", "words"),
    [
        (running("2026-11-30T10:00:05Z", "ffffffffffffffff"), None, "spark-1 runs revision ffffffffffffffff"),
        (None, ABSENT, "spark-2 has no engine container"),
        (None, running("2026-11-30T10:09:00Z"), "spark-2's engine container restarted after the head's"),
    ],
    ids=["old-revision", "removed", "restarted-by-hand"],
)
def test_status_drift(spark_plan, head, worker, words):
    p = with_revision(spark_plan)
    s = statuses(p, head or running("2026-11-30T10:00:05Z"), worker or running("2026-11-30T10:00:01Z"))
    state, sentence = status.verdict(p, s, status.Health(200, (p.model_name,)))
    assert state == "drift" and words in sentence and "`pulumi up` restarts the group in order" in sentence


def test_status_not_deployed_and_unhealthy(spark_plan):
    p = with_revision(spark_plan)
    absent = ABSENT
    assert status.verdict(p, statuses(p, absent, absent), None)[0] == "not deployed"
    s = statuses(p, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    state, sentence = status.verdict(p, s, status.Health(503, ()))
    assert state == "unhealthy" and "/health answers 503" in sentence


def test_status_table_lists_each_node(spark_plan):
    p = with_revision(spark_plan)
    s = statuses(p, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    text = render_text(report.status_table(p, s, status.Health(200, (p.model_name,))))
    assert "spark-1" in text and "spark-2" in text and "/health 200" in text and REV in text


def test_status_says_failed_start_when_the_configured_revision_failed_and_an_earlier_one_serves(spark_plan):
    from spark_llm.group.history import failure_record

    p = with_revision(spark_plan)
    earlier = "fedcba9876543210"
    s = statuses(p, running("2026-11-30T10:00:05Z", earlier), running("2026-11-30T10:00:01Z", earlier))
    failed = json.dumps(failure_record(REV, "sglang", "head (head): engine container is exited", "2026-11-30T09:59"))
    state, sentence = status.verdict(p, s, status.Health(200, (p.model_name,), last_start=failed))
    assert state == "failed_start"
    assert sentence.startswith(f"revision {REV} (this config) failed to start last time (2026-11-30T09:59: head")
    assert f"the nodes run revision {earlier} (the one that served before: a rollback)" in sentence
    # Once the configured revision serves, the old failure is history only.
    s = statuses(p, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    assert status.verdict(p, s, status.Health(200, (p.model_name,), last_start=failed))[0] == "in sync"


def test_status_exits_1_naming_the_rank_that_serves_on_sockets(spark_plan, status_json):
    """Issue 41, 1: a start onto sockets (the supervisor's restart after a worker's reboot) serves; status said
    `in sync`, exit 0. Now it names the rank and NET/Socket, what to check and what to run, and exits 1."""
    p = with_revision(spark_plan)
    nodes = statuses(p, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    socket = {"transport": "Socket", "line": "NET/Socket : Using [0]enp1s0f1np1:192.168.100.17<0>",
              "problem": "NCCL fell back to sockets (NET/Socket : Using [0]enp1s0f1np1:192.168.100.17<0>)"
              " instead of RoCE over rocep1s0f1"}  # fmt: skip
    record = {"revision": REV, "at": "2026-11-30T10:00:09Z", "by": "supervisor", "fabric": {"spark-2": socket}}
    health = status.Health(200, (p.model_name,), last_start=json.dumps(record), live=200, answer=200)
    code, out = status_json(p, nodes, health)
    assert code == 1 and out["state"] == "off the fabric", out
    assert out["summary"].startswith("spark-2: NCCL fell back to sockets (NET/Socket : Using [0]enp1s0f1np1")
    assert "by the supervisor's restart" in out["summary"] and "`spark-llm restart`" in out["summary"]
