"""`spark-llm status` while the supervisor works: a restart under way is said as such, not as drift for `pulumi up`."""

from __future__ import annotations

import json

from spark_llm.ops.status import command as status
from spark_llm.plan.supervisor_report import SupervisorReport
from tests.unit.ops.node_facts import engine_section, running, statuses, with_revision

UNDER_WAY = json.dumps(
    {
        "restarts": [
            {"at": "2026-12-04T10:00:00Z", "reason": "spark-2's engine container is exited (exit code 1)"},
            {"at": "2026-12-04T11:00:00Z", "reason": "spark-1's engine container is exited", "result": "in progress"},
        ]
    }
)


def test_a_restart_under_way_is_said_and_up_is_not_asked_for(spark_plan, status_json):
    # Was: "drift: ... `pulumi up` restarts the group in order" while the supervisor was restarting it.
    plan = with_revision(spark_plan)
    stopped = (0, engine_section("exited", 0, "2026-12-04T10:59:00Z", "2026-12-04T11:00:01Z", "r", "ab", "false"))
    nodes = statuses(plan, stopped, running("2026-11-30T10:00:01Z"))
    report = SupervisorReport.parse(UNDER_WAY)
    health = status.Health(None, (), "nothing listens on the port", supervisor="running")
    code, out = status_json(plan, nodes, health, report)
    assert code == 1 and out["state"] == "restarting", out
    assert out["summary"].startswith("the supervisor is restarting the group (since 2026-12-04T11:00:00Z: spark-1's")
    assert "pulumi up` restarts" not in out["summary"]
    assert out["supervisor"]["container"] == "running"


def test_a_finished_restart_is_no_restart_under_way():
    done = json.loads(UNDER_WAY)
    done["restarts"][-1]["result"] = "served"
    assert SupervisorReport.parse(json.dumps(done)).restarting is None  # type: ignore[union-attr]
    assert SupervisorReport.parse(UNDER_WAY).restarting["at"] == "2026-12-04T11:00:00Z"  # type: ignore[union-attr,index]
