"""`spark-llm status` reads the weights as preview does (issue 31, 2): the program's probe and the drift rule."""

from __future__ import annotations

import json

from spark_llm.ops.status import command as status
from spark_llm.ops.status import read as status_read
from spark_llm.ops.status import weights as status_weights
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.weights.steps import DRIFT_STEP, PROBE_SECTION
from tests.unit.ops.status.conftest import reading
from tests.unit.ops.status.test_status_canary import _run, running, statuses, with_revision

DIGEST = "d" * 64


def observed(plan, **weights_of: tuple[str, str | None]) -> dict[str, NodeObservation]:
    """Each node's observation: (recorded value, live digest) of its weights; unnamed nodes are as verified."""
    out = {}
    for node in plan.nodes:
        recorded, live = weights_of.get(node.name.replace("-", "_"), (DIGEST, DIGEST))
        tokens = {DRIFT_STEP: recorded if " " in recorded else f"tok {recorded}"}
        facts = {PROBE_SECTION: live} if live is not None else {}
        out[node.name] = NodeObservation(node.name, tokens=tokens, facts=facts)
    return out


def test_weights_drift_is_the_programs_rule_on_the_programs_probe(spark_plan):
    # Status reads each node with the program's probe and its weights' probe (the manifest tool's scan, as at every
    # preview), in the one script it runs there.
    assert all("scan" in status_read.node_script(spark_plan, node) for node in spark_plan.nodes)
    cut_short = observed(spark_plan, spark_2=("unverified -", "e" * 64))  # the copy began, then was killed
    found = status_weights.weights_drift(spark_plan, cut_short)
    assert found == ["weights on spark-2: a copy began and was not verified (cut short)"]
    changed = observed(spark_plan, spark_2=(DIGEST, "e" * 64))
    assert status_weights.weights_drift(spark_plan, changed) == [f"weights on spark-2: now {'e' * 64}, was {DIGEST}"]
    assert status_weights.weights_drift(spark_plan, observed(spark_plan)) == []


def test_a_group_that_runs_on_unverified_weights_is_drift_not_in_sync(
    spark_plan, monkeypatch, capsys, weights_as_verified
):
    plan = with_revision(spark_plan)
    nodes = statuses(plan, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    monkeypatch.setattr(status, "collect_stack", reading(nodes, status.Health(200, (plan.model_name,))))
    monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: {})
    weights_as_verified.append("weights has not run on spark-2 yet")
    assert _run(plan, as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "drift" and report["weights"] == ["weights has not run on spark-2 yet"]
    assert report["summary"].startswith("weights has not run on spark-2 yet: `pulumi up` copies the weights again")
