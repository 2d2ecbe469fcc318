"""The fan-out step's plan and script (tests/integration/test_weights_fanout.py runs them on the sim)."""

from __future__ import annotations

import json
import re

import pytest

from spark_llm import config
from spark_llm.plan import deployment as plan
from spark_llm.plan.fabric import FABRIC_SSH_OPTIONS
from spark_llm.plan.weights import steps as weights
from spark_llm.plan.weights.fanout import fanout_plan, fanout_sources, render_fanout
from spark_llm.plan.weights.sync import RSYNC_OPTIONS
from tests.conftest import dual_spark_raw

TOOL = weights.MANIFEST_TOOL.read_text()
FANOUT = fanout_sources()


def build(**transfer):
    raw = dual_spark_raw()
    if transfer:
        raw["transfer"] = transfer
    cfg = config.parse(raw)
    return cfg, plan.build_plan(cfg, plan.LAUNCH_TEMPLATE.read_text())


def test_the_plan_pins_each_workers_host_key_and_names_the_fabric_key_on_the_head():
    cfg, p = build()
    data = fanout_plan(cfg, p.head, list(p.workers), {"spark-2": "tok"}, "weights")
    (worker,) = data["workers"]
    assert worker["address"] == "192.168.200.13" and worker["host_key"].startswith("ssh-ed25519 ")
    assert data["fabric_key"] == cfg.network.fabric_key_path and data["path"] == cfg.model.path
    assert "tok" in worker["record"] and "/home/aurora/spark-llm/state" in worker["record"]
    # Defaults: the head's cores decide the streams; rsync daemons on the fabric; the documented timeout.
    assert data["streams"] is None and data["transport"] == "rsyncd" and data["timeout"] == 21600
    assert data["idle_timeout"] == 60  # rsync's --timeout: a cut link fails the copy after a minute
    assert data["rsync_options"] == list(RSYNC_OPTIONS)  # the one list every weights copy uses


def test_the_idle_bound_on_the_fabric_is_the_users_choice_within_limits():
    raw = dual_spark_raw()
    raw["timeouts"] = {"fabricIdleSeconds": 20}
    cfg = config.parse(raw)
    p = plan.build_plan(cfg, plan.LAUNCH_TEMPLATE.read_text())
    assert fanout_plan(cfg, p.head, list(p.workers), {"spark-2": "tok"}, "weights")["idle_timeout"] == 20
    raw["timeouts"] = {"fabricIdleSeconds": 2}
    with pytest.raises(config.ConfigError, match=r"spark-llm:timeouts.fabricIdleSeconds"):
        config.parse(raw)


def test_streams_and_encryption_are_the_users_choice():
    cfg, p = build(streams=6, encrypt=True)
    data = fanout_plan(cfg, p.head, list(p.workers), {"spark-2": "tok"}, "weights")
    assert data["streams"] == 6 and data["transport"] == "ssh"


def test_bad_streams_are_refused_naming_the_key():
    raw = dual_spark_raw()
    raw["transfer"] = {"streams": 0}
    try:
        config.parse(raw)
    except config.ConfigError as exc:
        assert "spark-llm:transfer.streams" in str(exc)
    else:
        raise AssertionError("streams: 0 was accepted")


def test_the_script_carries_the_plan_and_runs_the_fanout_with_the_manifest_tool_last():
    cfg, p = build()
    script = render_fanout(cfg, p.head, list(p.workers), TOOL, FANOUT, {"spark-2": "tok"}, "weights")
    plan_json = re.search(r"<<'SPARK_LLM_FANOUT_PLAN'\n(.*?)\nSPARK_LLM_FANOUT_PLAN\n", script, re.S).group(1)
    data = json.loads(plan_json)
    assert data["workers"][0]["name"] == "spark-2"
    # The same pinned-key ssh options as every other head -> worker step (spark_llm.plan.fabric).
    assert data["ssh_options"] == list(FABRIC_SSH_OPTIONS) and "StrictHostKeyChecking=yes" in data["ssh_options"]
    assert script.rstrip().splitlines()[-1].startswith('python3 -u "$work/fanout.py" "$work/plan.json" "$tool"')
