"""The firewall under Pulumi mocks: with spark-llm:network.firewall fabric-only, one step per node that installs
the table, removes it as its delete, and that every engine container waits for; none while it is off."""

from __future__ import annotations

from tests.unit.graph_mocks import dual_spark_stack_file, inputs, pinned, register


def firewall_on() -> dict:
    raw = pinned(dual_spark_stack_file())
    raw["network"] = {**raw["network"], "firewall": "fabric-only"}
    return raw


def test_each_node_gets_the_table_before_its_engine_and_loses_it_at_delete(monkeypatch):
    registered = register(monkeypatch, firewall_on())
    for node in ("spark-1", "spark-2"):
        step = registered[f"spark-firewall-{node}"]
        assert step.type == "command:remote:Command"
        got = inputs(step)
        assert "fw_install spark-llm" in got["stdin"] and "table inet spark-llm {" in got["stdin"]
        assert "SPARK_LLM_PHASE=delete bash" in got["delete"]
        assert step.deleteBeforeReplace
        engine = registered[f"spark-engine-{node}"]
        assert any(dep.endswith(f"::spark-firewall-{node}") for dep in engine.dependencies), engine.dependencies


def test_no_firewall_step_while_it_is_off(registered):
    assert not [name for name in registered if "firewall" in name]
