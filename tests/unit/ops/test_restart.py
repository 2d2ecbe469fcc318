"""`spark-llm restart`: the workers' URNs from the stack export and the start order."""

from __future__ import annotations

from spark_llm.ops import restart
from tests.unit.ops.node_facts import build, running, statuses


def test_worker_urns_come_from_the_stack_export(raw_config):
    p = build(raw_config)
    kind = "docker:index/container:Container"
    resources = [
        {"type": kind, "urn": "urn:x::spark-engine-spark-1"},
        {"type": kind, "urn": "urn:x::spark-engine-spark-2"},
        {"type": kind, "urn": "urn:x::spark-engine-spark-22"},  # another node's, not spark-2's
        {"type": kind, "urn": "urn:x::spark-engine-spark-2", "delete": True},  # pending delete: not the live one
        {"type": "command:remote:Command", "urn": "urn:x::spark-engine-spark-2-watch"},
    ]
    assert restart.member_urns({"deployment": {"resources": resources}}, p) == ["urn:x::spark-engine-spark-2"]


def test_restart_start_order_by_container_start_time(spark_plan):
    s = statuses(spark_plan, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    assert restart.start_order(s) == ["spark-2", "spark-1"]


def test_restart_also_replaces_the_step_that_stops_the_supervisor_so_it_never_fights_the_replacement(spark_plan):
    resources = [
        {"type": "command:remote:Command", "urn": "urn:x::spark-engine-stop-supervisor"},
        {"type": "command:remote:Command", "urn": "urn:x::spark-engine-stop-supervisor", "delete": True},
        {"type": "command:remote:Command", "urn": "urn:x::spark-engine-stop-spark-1"},
    ]
    export = {"deployment": {"resources": resources}}
    assert restart.supervisor_stop_urns(export, spark_plan) == ["urn:x::spark-engine-stop-supervisor"]
    assert restart.supervisor_stop_urns({"deployment": {"resources": resources[2:]}}, spark_plan) == []
