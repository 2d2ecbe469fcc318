"""`spark-llm rollback`'s closing words: a rollback to the revision the stack file asks for anyway is not called a
rollback of a failed start (a user ran it with nothing failed, and was told the config's revision failed)."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_llm.ops import rollback


class FakeCli:
    """PulumiCli as `rollback.run` uses it: the stack file's plan asks for `asked`; the rollback's up serves `good`."""

    asked = "a" * 16
    good = "a" * 16

    def __init__(self, stack: str = "sim", config_file: str | None = None, cwd: Path | None = None) -> None:
        self.stack, self.config_file, self.cwd = stack, config_file, cwd
        self.rollback = config_file is not None and "spark-llm-rollback-" in config_file

    def capture(self, *args: str) -> str:
        return "[]"

    def load_plan(self) -> SimpleNamespace:
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
