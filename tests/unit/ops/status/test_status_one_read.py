"""`spark-llm status` of several models reads each node once for all of them (issue 40: it read every node once per
model, and the weights and the router in sessions of their own).

User story: an operator with two models behind the router asks `spark-llm status`; each node is asked in one ssh
session that reads both models' containers, the weights' probe and (on the head) both heads' health and the router.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from spark_llm.config import parse
from spark_llm.ops.status import command as status
from spark_llm.ops.status import read as status_read
from spark_llm.plan.deployment import LAUNCH_TEMPLATE
from spark_llm.plan.observation import GROUP_MARK
from spark_llm.plan.stack import build_stack
from spark_llm.remote.runner import NodeRun
from tests.unit.ops.several_models import SMALL, two_models_raw

ROUTER = {"image": "ghcr.io/you/router@sha256:" + "ab" * 32, "port": 4000}


def test_two_models_behind_the_router_are_read_in_one_session_a_node(raw_config, monkeypatch, capsys):
    raw = {**two_models_raw(raw_config), "router": ROUTER, "apiKey": "sk-test"}
    stack = build_stack(parse(raw), LAUNCH_TEMPLATE.read_text())
    sessions: Counter[str] = Counter()
    scripts: dict[str, str] = {}

    def run_on(target, script, *, timeout=None, **kwargs):
        sessions[target.name] += 1
        scripts[target.name] = script
        return NodeRun(target.name, 0, "", "", 0.1)  # nothing answers: every model reads as not in sync

    monkeypatch.setattr(status_read, "run_on", run_on)
    monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: {})
    assert status.run(None, stack, argparse.Namespace(json=True, timeout=5, hosts=False)) == 1
    assert sessions == {"spark-1": 1, "spark-2": 1}  # and no canary session: no model is in sync
    head, worker = scripts["spark-1"], scripts["spark-2"]
    # The head's one script reads both models (each in its part) and the router once; the worker's the big one only.
    assert f"{GROUP_MARK}\\t%s\\n' 0" in head and f"{GROUP_MARK}\\t%s\\n' 1" in head
    assert head.count("capture router_state") == 1 and "spark-llm-engine-embed" in head
    assert "spark-llm-engine-embed" not in worker and "capture router_state" not in worker
    # The weights' probe (the manifest tool's scan) rides in each node's script, not in a session of its own.
    assert "scan" in head and "scan" in worker
    document = json.loads(capsys.readouterr().out)
    assert sorted(document["models"]) == sorted(stack.models) and document["router"]["state"] == "absent"
    assert [n["node"] for n in document["models"][SMALL]["nodes"]] == ["spark-1"]
