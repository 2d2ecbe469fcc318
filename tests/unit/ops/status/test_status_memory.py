"""`spark-llm status` says the memory admission's verdict where `pulumi up` would restart the group (issue 41, 7):
status once promised that `pulumi up` restarts the group while preview called a node refused and `up` failed on it
before stopping anything."""

from __future__ import annotations

import json

from spark_llm.group.memory import GPU_SECTION, INFO_SECTION
from spark_llm.ops.status import command as status
from spark_llm.ops.status import read as status_read
from spark_llm.ops.status.memory import refusals
from spark_llm.ops.status.read import GroupReading
from spark_llm.plan.observation import NodeObservation
from tests.unit.ops.node_facts import running, statuses, with_revision
from tests.unit.ops.status.test_status_canary import _run

GIB_KB = 1024**2


def memory(free_gib: int) -> dict[str, str]:
    """A node's memory probe sections: 121 GiB in all, `free_gib` of it available, no GPU process."""
    info = f"MemTotal={121 * GIB_KB} MemFree={free_gib * GIB_KB} MemAvailable={free_gib * GIB_KB}"
    return {INFO_SECTION: info, GPU_SECTION: ""}


def observed(plan, **free_of: int) -> dict[str, NodeObservation]:
    return {
        n.name: NodeObservation(n.name, facts=memory(free_of.get(n.name.replace("-", "_"), 115))) for n in plan.nodes
    }


def test_status_reads_the_memory_sections_the_admission_judges(spark_plan):
    assert all("memory_probe" in status_read.node_script(spark_plan, node) for node in spark_plan.nodes)


def test_a_node_that_cannot_hold_its_engine_now_is_said_in_the_admissions_words(spark_plan):
    assert refusals(spark_plan, observed(spark_plan)) == []
    [refused] = refusals(spark_plan, observed(spark_plan, spark_2=2))
    assert refused.startswith("memory admission spark-2: refused: needs 6.0 GiB") and "has 2.0 GiB" in refused


def test_a_restart_that_up_would_refuse_says_so_beside_the_restart(spark_plan, monkeypatch, capsys):
    plan = with_revision(spark_plan)
    # worker on another revision: `pulumi up` would restart the group, and spark-2 has 2 GiB free.
    nodes = statuses(plan, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z", revision="other"))
    seen = observed(plan, spark_2=2)

    def collect_stack(stack, timeout):
        reading = GroupReading(nodes, status.Health(200, (plan.model_name,)), None, seen, [])
        return {name: reading for name in stack.models}, None

    monkeypatch.setattr(status, "collect_stack", collect_stack)
    monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: {})
    assert _run(plan, as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "drift" and "`pulumi up` restarts the group in order" in report["summary"], report
    assert "; but memory admission spark-2: refused" in report["summary"]
    assert report["summary"].endswith("`pulumi up` would fail at the memory admission before anything stops")
