"""`spark-llm status` reads the firewall as preview does (issue 41, 7): a table gone or changed since `pulumi up`
installed it is drift in preview's words, not `in sync` beside a preview that says `pulumi up` installs it again."""

from __future__ import annotations

import json

from spark_llm.ops.status import command as status
from spark_llm.ops.status import read as status_read
from spark_llm.ops.status.firewall import firewall_drift
from spark_llm.ops.status.read import GroupReading
from spark_llm.plan import firewall
from spark_llm.plan.observation import NodeObservation
from tests.unit.ops.node_facts import build, running, statuses, with_revision
from tests.unit.ops.status.test_status_canary import _run

TABLE = "t" * 16


def walled(raw_config):
    raw_config["network"] = {"fabricInterfaces": ["enp1s0f0np0"], "firewall": "fabric-only"}
    return with_revision(build(raw_config))


def observed(plan, **table_of: str | None) -> dict[str, NodeObservation]:
    """Each node's observation: the table's digest as the probe reads it now ("absent": gone); unnamed nodes as
    installed."""
    out = {}
    for node in plan.nodes:
        live = table_of.get(node.name.replace("-", "_"), TABLE)
        out[node.name] = NodeObservation(
            node.name, tokens={firewall.STEP: f"tok {TABLE}"}, facts={firewall.TABLE_SECTION: live}
        )
    return out


def test_status_reads_the_table_with_the_programs_probe_only_while_the_firewall_is_on(raw_config, spark_plan):
    plan = walled(raw_config)
    assert all("fw_digest" in status_read.node_script(plan, node) for node in plan.nodes)
    assert not any("fw_digest" in status_read.node_script(spark_plan, node) for node in spark_plan.nodes)
    assert firewall_drift(spark_plan, observed(spark_plan, spark_2="absent")) == []


def test_a_table_gone_or_changed_is_preview_s_drift_warning(raw_config):
    plan = walled(raw_config)
    assert firewall_drift(plan, observed(plan)) == []
    [gone] = firewall_drift(plan, observed(plan, spark_2="absent"))
    assert gone == firewall.drift_warning(plan.nodes[1], f"firewall on spark-2: gone (was {TABLE})")
    assert "`pulumi up` installs it again" in gone
    [changed] = firewall_drift(plan, observed(plan, spark_1="u" * 16))
    assert f"now {'u' * 16}, was {TABLE}" in changed
    # No nft, or no root without a password: nothing can be said against the step's record.
    assert firewall_drift(plan, observed(plan, spark_2="unknown")) == []


def test_a_group_serving_behind_a_deleted_table_is_drift_not_in_sync(raw_config, monkeypatch, capsys):
    plan = walled(raw_config)
    nodes = statuses(plan, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    seen = observed(plan, spark_2="absent")

    def collect_stack(stack, timeout):
        return {
            name: GroupReading(nodes, status.Health(200, (plan.model_name,)), None, seen, []) for name in stack.models
        }, None

    monkeypatch.setattr(status, "collect_stack", collect_stack)
    monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: {})
    assert _run(plan, as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "drift", report
    assert report["summary"].startswith("drift: the firewall (nftables table inet spark-llm) on spark-2 changed")
