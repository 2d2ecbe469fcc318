"""What `spark-llm status` reads from a node's output (spark_llm.ops.status.read): uptime from docker's times, the
head's health and served models, the supervisor's state file."""

from __future__ import annotations

import json

import pytest

from spark_llm.group.times import docker_time
from spark_llm.ops.status import read as status_read
from tests.unit.ops.node_facts import engine_section, facts, node_run, ok_run, running


def test_status_uptime_and_head_health_from_the_scripts_output(spark_plan):
    run = node_run(
        "spark-1",
        running("2026-11-30T10:00:00Z"),
        health=(0, "200"),
        models=(0, json.dumps({"data": [{"id": "Qwen/Qwen3.5-122B-A10B-FP8"}]})),
    )
    s = status_read.node_status(spark_plan.head, "spark-llm-engine", run)
    assert s.state == "running" and s.uptime_s == pytest.approx(1795000000.0 - docker_time("2026-11-30T10:00:00Z"))
    health = status_read.head_health(run)
    assert health.healthy and health.models == ("Qwen/Qwen3.5-122B-A10B-FP8",)


def test_a_head_that_does_not_listen_says_so():
    run = node_run(
        "spark-1",
        (0, engine_section("exited", 1, "x", "y", "z", "id", "false")),
        health=(7, "000curl: (7) Failed to connect"),
    )
    assert status_read.head_health(run) == status_read.Health(None, (), "nothing listens on the port")


def test_status_reads_the_supervisors_state_from_the_heads_script(spark_plan):
    state = {
        "restarts": [{"at": "2026-12-03T10:00:00Z", "reason": "spark-2's engine exited (255)", "result": "served"}],
        "gave_up": {"at": "2026-12-03T10:05:00Z", "reason": "spark-2's engine exited (1) (after 3 restarts in 600 s)"},
    }
    report = status_read.supervisor_report(ok_run("spark-1", facts(supervisor=(0, json.dumps(state)))))
    assert report is not None and report.gave_up is not None
    lines = report.lines()
    assert lines[0] == (
        "supervisor restarted the group at 2026-12-03T10:00:00Z: spark-2's engine exited (255) -> served"
    )
    assert lines[1].startswith("the supervisor gave up at 2026-12-03T10:05:00Z: spark-2's engine exited (1)")
    # No state file (no supervisor yet, or it never wrote one): nothing to say.
    assert status_read.supervisor_report(ok_run("spark-1", facts(supervisor=(1, "cat: no such file")))) is None


def test_the_heads_script_reads_the_supervisors_container_apart_from_its_last_start(spark_plan):
    run = node_run(
        "spark-1",
        running("2026-11-30T10:00:00Z"),
        health=(0, "200"),
        last_start=(0, 'last_start\t{"revision": "r"}'),
        supervisor_container=(0, "exited"),
    )
    health = status_read.head_health(run, "/health_generate")
    assert (health.supervisor, health.last_start, health.path) == ("exited", '{"revision": "r"}', "/health_generate")
    gone = node_run("spark-1", running("2026-11-30T10:00:00Z"), supervisor_container=(1, "Error: No such object"))
    assert status_read.head_health(gone).supervisor == "absent"
    assert status_read.head_health(node_run("spark-1", running("2026-11-30T10:00:00Z"))).supervisor == ""
