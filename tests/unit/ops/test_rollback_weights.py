"""Which weights `spark-llm rollback` serves (issue 31, 1): the last good start's, put back where a relaunch replaced
them, refused where a node holds them nowhere."""

from __future__ import annotations

import pytest

from spark_llm.ops import rollback_weights
from spark_llm.plan.rollback import RollbackRefusedError

OLD, NEW = "a" * 64, "b" * 64


@pytest.fixture
def nodes(spark_plan, monkeypatch):
    """Each node's (current digest, kept digests), as the version script prints them; the head's history."""
    seen: dict = {"history": [{"revision": "r", "weights": OLD}, {"revision": "s", "failed": "x"}]}
    monkeypatch.setattr(rollback_weights, "read_history", lambda ssh, path: seen["history"])

    def run_script(ssh, script, timeout):
        assert ".spark-llm-versions" in script and ".spark-llm-manifest.json" in script
        current, kept = seen[ssh.name]
        return "\n".join([current, *kept]) + "\n"

    monkeypatch.setattr(rollback_weights, "run_script", run_script)
    return spark_plan, seen


def test_weights_every_node_still_runs_are_kept_as_they_are(nodes):
    plan, seen = nodes
    seen.update({"spark-1": (OLD, []), "spark-2": (OLD, [])})
    weights = rollback_weights.weights_to_restore(plan)
    assert (weights.digest, weights.restore) == (OLD, False) and "no weights copied" in weights.note


def test_weights_a_relaunch_replaced_are_put_back_from_what_each_node_kept(nodes):
    plan, seen = nodes
    seen.update({"spark-1": (NEW, [OLD]), "spark-2": (NEW, [OLD])})
    weights = rollback_weights.weights_to_restore(plan)
    assert (weights.digest, weights.restore) == (OLD, True)
    assert "spark-1, spark-2 run other weights" in weights.note and "no byte copied" in weights.note


def test_weights_a_node_holds_nowhere_refuse_the_rollback_with_the_truth(nodes):
    plan, seen = nodes
    seen.update({"spark-1": (NEW, [OLD]), "spark-2": (NEW, [])})
    with pytest.raises(RollbackRefusedError) as refused:
        rollback_weights.weights_to_restore(plan)
    said = str(refused.value)
    assert f"served weights {OLD[:16]}, which spark-2 no longer holds" in said and "Nothing was changed" in said
