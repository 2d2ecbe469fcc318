"""The operations a killed `pulumi up` left pending (spark_llm.ops.status.pending): status names them and the one
command that clears them, instead of a warning on every `up` that no page explains (issue 41, 7)."""

from __future__ import annotations

import argparse
import json

from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.ops.status import command as status
from spark_llm.ops.status.pending import CLEAR, pending_operations, sentence
from tests.unit.ops.node_facts import running, statuses, with_revision
from tests.unit.ops.status.conftest import reading

STARTED = ("2026-11-30T10:00:05Z", "2026-11-30T10:00:01Z")

GATE = (
    "urn:pulumi:sim::spark-llm::spark-llm:index:SparkStack$spark-llm:index:EngineGroup$command:local:Command"
    "::spark-engine-ready"
)
ENGINE = (
    "urn:pulumi:sim::spark-llm::spark-llm:index:EngineGroup$docker:index/container:Container::spark-engine-worker-1"
)


def export(pending: list[tuple[str, str]], held: list[str]) -> dict:
    """A `pulumi stack export` (apitype.DeploymentV3's keys) with these pending operations and resources."""
    return {
        "version": 3,
        "deployment": {
            "resources": [{"urn": urn, "type": urn.split("::")[-2].rpartition("$")[2]} for urn in held],
            "pending_operations": [{"resource": {"urn": urn}, "type": op} for urn, op in pending],
        },
    }


def test_a_state_without_pending_operations_says_nothing():
    assert pending_operations(export([], [GATE])) == [] and sentence([]) == ""
    assert pending_operations({"deployment": {}}) == [] and pending_operations({}) == []


def test_a_create_the_next_up_made_again_is_named_with_the_command_that_clears_it():
    pending = pending_operations(export([(GATE, "creating")], [GATE, ENGINE]))
    [gate] = pending
    assert gate.name == "spark-engine-ready (command:local:Command)" and gate.remade
    said = sentence(pending, " --stack sim --config-file /tmp/Pulumi.sim.yaml")
    assert said.startswith(
        "1 operation(s) pending in the state (spark-engine-ready (command:local:Command) creating): a `pulumi up`"
        " still running has them, or one that was killed left them. If none runs now: the nodes run what this status"
        " shows"
    ), said
    assert f"`{CLEAR} --stack sim --config-file /tmp/Pulumi.sim.yaml` clears them" in said
    assert gate.to_json() == {"urn": GATE, "operation": "creating", "in_state": True}


def test_a_create_the_state_does_not_hold_is_said_to_be_maybe_on_a_node_and_up_comes_first():
    pending = pending_operations(export([(ENGINE, "creating"), (GATE, "creating")], [GATE]))
    said = sentence(pending)
    assert "If none runs now: the state does not hold spark-engine-worker-1 (docker:index/container:Container)" in said
    assert said.endswith(f"Run `pulumi up` (it makes them again), then `{CLEAR}`")


def test_status_of_a_group_in_sync_names_the_pending_operations_and_stays_in_sync(spark_plan, monkeypatch, capsys):
    """The nodes are what status reads (in sync, exit 0); the state's leftovers are a line of their own, in --json
    too, so a script sees both, with the command for this very stack and config file."""
    p = with_revision(spark_plan)
    health = status.Health(200, (p.model_name,), live=200, answer=200)
    monkeypatch.setattr(status, "collect_stack", reading(statuses(p, running(STARTED[0]), running(STARTED[1])), health))
    monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: {})
    monkeypatch.setattr(
        status, "state_pending", lambda _pulumi: pending_operations(export([(GATE, "creating")], [GATE]))
    )
    monkeypatch.setattr(status, "with_canaries", lambda stack, reports, outputs, readings: reports)
    pulumi = PulumiCli(stack="sim", config_file="/tmp/my stack.yaml")
    code = status.run(pulumi, p, argparse.Namespace(json=True, timeout=5))
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["state"] == "in sync", out
    assert out["pending_operations"] == [{"urn": GATE, "operation": "creating", "in_state": True}]
    assert out["pending_note"].startswith("1 operation(s) pending in the state (spark-engine-ready")
    assert f"`{CLEAR} --stack sim --config-file '/tmp/my stack.yaml'` clears them" in out["pending_note"]
