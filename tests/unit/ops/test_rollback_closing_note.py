"""`spark-llm rollback`'s closing words: a rollback to the revision the stack file asks for anyway is not called a
rollback of a failed start (a user ran it with nothing failed, and was told the config's revision failed)."""

from __future__ import annotations

import argparse
import json
import os
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_llm.ops import rollback, rollback_weights


class FakeCli:
    """PulumiCli as `rollback.run` uses it: the stack file's plan asks for `asked`; the rollback's up serves `good`."""

    asked = "a" * 16
    good = "a" * 16

    def __init__(self, stack: str = "sim", config_file: str | None = None, cwd: Path | None = None) -> None:
        self.stack, self.config_file, self.cwd = stack, config_file, cwd
        self.rollback = config_file is not None and "spark-llm-rollback-" in config_file

    def capture(self, *args: str) -> str:
        return "[]"

    def load_plan(self, model: str | None = None) -> SimpleNamespace:
        return SimpleNamespace(group_revision=self.good if self.rollback else self.asked)


@pytest.fixture
def run_rollback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    (tmp_path / "Pulumi.yaml").write_text("name: spark-llm\n")
    (tmp_path / "Pulumi.sim.yaml").write_text("config: {}\n")
    update = SimpleNamespace(when="2026-12-03T05:00:00Z")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rollback, "PulumiCli", FakeCli)
    monkeypatch.setattr(rollback, "last_good_update", lambda history: update)
    monkeypatch.setattr(rollback, "rollback_stack_file", lambda update, current, project: {"config": {}})
    monkeypatch.setattr(rollback, "changed_keys", lambda update, current, project: [])
    monkeypatch.setattr(rollback, "_up", lambda back, message, deadline: 0)
    monkeypatch.setattr(rollback, "_first_completion", lambda plan, deadline: datetime.now().astimezone())
    monkeypatch.setattr(rollback, "_last_failure_at", lambda plan: None)
    kept = rollback_weights.RollbackWeights("d" * 64, False, "every node still has the weights: no weights copied")
    monkeypatch.setattr(rollback, "weights_to_restore", lambda plan: kept)
    monkeypatch.setattr(rollback, "already_serving", lambda plan, digest: "")  # the group does not serve it now
    # What the rollback sets for its `pulumi up`: put back as they were after each test.
    for variable in (rollback_weights.RESTORE_ENV, rollback_weights.RESTORE_MODEL_ENV, rollback.ROLLBACK_ENV):
        monkeypatch.setenv(variable, "")

    def run(asked: str, good: str) -> tuple[int, str]:
        monkeypatch.setattr(FakeCli, "asked", asked)
        monkeypatch.setattr(FakeCli, "good", good)
        args = argparse.Namespace(after_pid=None)
        code = rollback.run(FakeCli(cwd=tmp_path), None, args)
        said = capsys.readouterr()
        return code, said.err + said.out

    return run


def test_a_rollback_to_the_revision_the_config_asks_for_says_so_not_that_it_failed(run_rollback):
    code, said = run_rollback("a" * 16, "a" * 16)
    assert code == 0
    assert "asks for this same revision" in said and "no change to the engine group" in said
    assert "is a rollback" not in said and "failed to start" not in said


def test_a_rollback_from_a_failed_revision_says_the_config_still_asks_for_it(run_rollback):
    code, said = run_rollback("b" * 16, "a" * 16)
    assert code == 0
    assert f"still asks for revision {'b' * 16}, which failed to start" in said


def test_with_json_a_refusal_is_a_json_object_on_stdout_and_the_words_on_stderr(
    tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "Pulumi.yaml").write_text("name: spark-llm\n")
    monkeypatch.setattr(rollback, "PulumiCli", FakeCli)

    def refuse(history):
        raise rollback.RollbackRefusedError("the stack has no succeeded update to go back to")

    monkeypatch.setattr(rollback, "last_good_update", refuse)
    code = rollback.run(FakeCli(cwd=tmp_path), None, argparse.Namespace(after_pid=None, json=True))
    said = capsys.readouterr()
    assert code == 2
    assert json.loads(said.out) == {"ok": False, "refused": "the stack has no succeeded update to go back to"}
    assert "spark-llm rollback: the stack has no succeeded update" in said.err


def test_with_json_a_rollback_that_served_says_what_serves_in_json_and_nothing_else_on_stdout(
    run_rollback, monkeypatch, capsys
):
    # run_rollback's patches, with --json: what it says goes to stderr, one object to stdout.
    monkeypatch.setattr(FakeCli, "asked", "b" * 16)
    code = rollback.run(FakeCli(cwd=Path.cwd()), None, argparse.Namespace(after_pid=None, json=True))
    said = capsys.readouterr()
    result = json.loads(said.out)
    assert code == 0 and result["ok"] and result["served"] and result["revision"] == "a" * 16
    assert result["config_asks_for"] == "b" * 16 and "serves again" in said.err


def test_a_second_rollback_when_the_last_good_revision_already_serves_changes_nothing_and_says_so(
    run_rollback, monkeypatch
):
    """Issue 41, 5: a second rollback in a row ran `pulumi up`, which copied the operator's edited source to every
    node and deleted the kept good version. When the last good revision already serves on its weights on every
    node, no `pulumi up` runs at all."""
    ups: list[str] = []
    monkeypatch.setattr(rollback, "_up", lambda back, message, deadline: ups.append(message) or 0)
    monkeypatch.setattr(rollback, "already_serving", lambda plan, digest: f"revision {'a' * 16} already serves")
    code, said = run_rollback("b" * 16, "a" * 16)
    assert code == 0 and ups == []
    assert f"revision {'a' * 16} already serves: nothing to roll back, nothing was changed" in said


def test_a_rollback_pins_the_weights_it_names_even_where_every_node_has_them(run_rollback, monkeypatch):
    """The rollback's `up` verifies or restores the last good digest, never copying the operator's source."""
    seen: dict[str, str | None] = {}

    def up(back, message, deadline):
        seen["pinned"] = os.environ.get(rollback_weights.RESTORE_ENV)
        return 0

    monkeypatch.setattr(rollback, "_up", up)
    code, _ = run_rollback("b" * 16, "a" * 16)
    assert code == 0 and seen["pinned"] == "d" * 64


def test_a_rollback_asks_no_answer_of_a_group_that_runs_another_revision(spark_plan, monkeypatch):
    """After a failed start the failed revision runs (maybe wedged): the rollback reads the members' labels and goes
    on at once, instead of waiting out a completion the wedged engine holds (16 s on the sim before it began)."""
    from spark_llm.plan.container import LABEL_REVISION
    from spark_llm.plan.observation import EngineState, NodeObservation

    def seen(revision: str) -> list[dict[str, NodeObservation]]:
        engine = EngineState(status="running", labels={LABEL_REVISION: revision})
        return [{n.name: NodeObservation(n.name, engine=engine) for n in spark_plan.nodes}]

    def never(plan):
        raise AssertionError("the group was asked for an answer")

    monkeypatch.setattr(rollback.status_read, "collect", never)
    monkeypatch.setattr(rollback, "observe_stack", lambda groups: seen("f" * 16))
    assert rollback.already_serving(spark_plan, "d" * 64) == ""
    asked = []
    monkeypatch.setattr(rollback.status_read, "collect", lambda plan: asked.append(plan) or ([], None, None))
    monkeypatch.setattr(rollback, "observe_stack", lambda groups: seen(spark_plan.group_revision))
    assert rollback.already_serving(spark_plan, "d" * 64) == "" and asked == [spark_plan]
