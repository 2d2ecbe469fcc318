"""`spark-llm status` without nodes: the weights' reading (an ssh probe of every node) is the test's to say."""

from __future__ import annotations

import argparse
import json

import pytest

from spark_llm.ops.status import command as status
from spark_llm.ops.status.read import GroupReading


@pytest.fixture(autouse=True)
def weights_as_verified(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What status.weights_drift returns: nothing differs unless a test appends what does."""
    found: list[str] = []
    monkeypatch.setattr(status, "weights_drift", lambda plan, seen: list(found))
    return found


@pytest.fixture(autouse=True)
def state_without_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack's state has no pending operations (no `pulumi stack export` runs; test_status_pending says more)."""
    monkeypatch.setattr(status, "state_pending", lambda _pulumi: [])


def reading(nodes, health, report=None, history=()):
    """A stand-in for status.collect_stack: every model of the stack read as `nodes`, `health` and the supervisor's
    `report` say (with the head's `history` of starts), no router."""

    def collect_stack(stack, timeout):
        return {name: GroupReading(list(nodes), health, report, {}, list(history)) for name in stack.models}, None

    return collect_stack


@pytest.fixture
def status_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`spark-llm status --json` on what the nodes are made to say: (exit code, the JSON report)."""

    def run(plan, nodes, health, report=None) -> tuple[int, dict]:
        monkeypatch.setattr(status, "collect_stack", reading(nodes, health, report))
        monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: {})
        code = status.run(None, plan, argparse.Namespace(json=True, timeout=5))
        return code, json.loads(capsys.readouterr().out)

    return run
