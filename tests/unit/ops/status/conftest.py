"""`spark-llm status` without nodes: the weights' reading (an ssh probe of every node) is the test's to say."""

from __future__ import annotations

import argparse
import json

import pytest

from spark_llm.ops.status import command as status


@pytest.fixture(autouse=True)
def weights_as_verified(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What status.weights_drift returns: nothing differs unless a test appends what does."""
    found: list[str] = []
    monkeypatch.setattr(status, "weights_drift", lambda plan: list(found))
    return found


@pytest.fixture
def status_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`spark-llm status --json` on what the nodes are made to say: (exit code, the JSON report)."""

    def run(plan, nodes, health, report=None) -> tuple[int, dict]:
        monkeypatch.setattr(status, "collect", lambda p, t: (nodes, health, report))
        monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: {})
        code = status.run(None, plan, argparse.Namespace(json=True, timeout=5))
        return code, json.loads(capsys.readouterr().out)

    return run
