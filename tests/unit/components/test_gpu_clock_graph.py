"""The GPU clock caps under Pulumi mocks: a capped node gets one step in the stack's room that locks its SM clock,
resets it as its delete (replaced delete-first: the old reset never follows the new lock), and that no engine waits
for; an uncapped node, and a stack with no cap, get none."""

from __future__ import annotations

from tests.unit.graph_mocks import dual_spark_stack_file, inputs, pinned, register


def test_a_capped_node_gets_a_step_that_locks_and_resets_beside_the_groups(monkeypatch):
    raw = pinned(dual_spark_stack_file())
    raw["nodes"][1]["smClockCapMhz"] = 1800
    registered = register(monkeypatch, raw)
    [name] = [name for name in registered if name.startswith("gpu-clock-")]
    step = registered[name]
    assert name == "gpu-clock-spark-2" and step.type == "command:remote:Command"
    got = inputs(step)
    assert "gc_apply 1800 " in got["stdin"] and "gc_remove " in got["stdin"]
    assert "SPARK_LLM_PHASE=delete bash" in got["delete"]
    assert step.deleteBeforeReplace
    # In the stack's room (the node's, whatever models run there), not in a model's group.
    assert registered["gpu-clock"].parent.endswith("spark-llm:components:SparkStack::stack")
    for node in ("spark-1", "spark-2"):
        engine = registered[f"spark-engine-{node}"]
        assert not any("gpu-clock" in dep for dep in engine.dependencies), engine.dependencies


def test_no_cap_no_step(registered):
    assert not [name for name in registered if "gpu-clock" in name]
