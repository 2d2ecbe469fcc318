"""After a failed start: the rollback command names the stack config file the failed `pulumi up` was given."""

from __future__ import annotations

import pytest
import yaml

from spark_llm.ops.after_failure import after_failure, config_file_of
from spark_llm.remote.pulumi_process import PulumiProcess


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["pulumi", "up", "--config-file", "Pulumi.x.yaml"], "/proj/Pulumi.x.yaml"),
        (["pulumi", "up", "--config-file=/abs/P.yaml", "--yes"], "/abs/P.yaml"),
        (["pulumi", "up", "--yes"], None),
        # An empty value names no file: the next one does.
        (["pulumi", "up", "--config-file=", "--config-file", "P.y.yaml"], "/proj/P.y.yaml"),
    ],
)
def test_the_config_file_is_read_from_the_pulumi_command_line(argv, expected):
    assert config_file_of(argv, "/proj") == expected


def test_no_stack_no_note_and_the_rollbacks_own_failure_starts_no_other(monkeypatch):
    assert after_failure({}) == ""
    monkeypatch.setenv("SPARK_LLM_ROLLBACK", "1")
    assert "no other rollback follows" in after_failure({"stack": "sim", "on_failure": "rollback"})


def test_stop_prints_the_command(monkeypatch):
    from spark_llm.ops import after_failure as module

    monkeypatch.delenv("SPARK_LLM_ROLLBACK", raising=False)
    monkeypatch.setattr(module, "pulumi_process", lambda: PulumiProcess(1, ["pulumi", "up"], "/p"))
    assert "\n  spark-llm rollback --stack sim\n" in after_failure({"stack": "sim", "on_failure": "stop"})


def test_an_interrupted_up_rolls_nothing_back(monkeypatch):
    # On Ctrl-C the command provider kills the gate's shell: the gate, reparented, must not start a rollback.
    from spark_llm.ops import after_failure as module

    monkeypatch.delenv("SPARK_LLM_ROLLBACK", raising=False)
    monkeypatch.setattr(module, "pulumi_process", lambda: PulumiProcess(1, ["pulumi", "up"], "/p"))
    monkeypatch.setattr(module, "STARTED_UNDER", -1)
    assert after_failure({"stack": "sim", "on_failure": "rollback"}) == module.INTERRUPTED
    monkeypatch.setattr(module, "pulumi_process", lambda: None)  # the shell was gone before the gate looked
    monkeypatch.setattr(module, "STARTED_UNDER", module.os.getppid())
    assert after_failure({"stack": "sim", "on_failure": "rollback"}) == module.INTERRUPTED


def test_a_failed_start_of_one_model_of_several_names_that_model_in_its_rollback(monkeypatch, tmp_path):
    """The gate of one model's group passes its model; the rollback command names it (`--model`) when the stack
    file the failed `up` was given lists several models, and stays as it was for a stack of one."""
    from spark_llm.ops import after_failure as module

    stack_file = tmp_path / "Pulumi.sim.yaml"
    argv = ["pulumi", "up", "--config-file", str(stack_file)]
    monkeypatch.delenv("SPARK_LLM_ROLLBACK", raising=False)
    monkeypatch.setattr(module, "pulumi_process", lambda: PulumiProcess(1, argv, "/p"))
    models = [{"name": "big", "path": "/m/big"}, {"name": "org/small", "path": "/m/small"}]
    stack_file.write_text(yaml.safe_dump({"config": {"spark-llm:models": models}}))
    note = after_failure({"stack": "sim", "on_failure": "stop"}, "org/small")
    assert f"\n  spark-llm rollback --stack sim --config-file {stack_file} --model org/small\n" in note
    stack_file.write_text(yaml.safe_dump({"config": {"spark-llm:model": {"name": "big", "path": "/m/big"}}}))
    note = after_failure({"stack": "sim", "on_failure": "stop"}, "big")
    assert f"\n  spark-llm rollback --stack sim --config-file {stack_file}\n" in note


def test_a_failed_start_of_the_revision_that_served_last_offers_and_starts_no_rollback(monkeypatch):
    """Issue 41, 7: a failed restart of the same revision offered a rollback to itself (and with onFailure
    rollback, started one, which restarted the same revision again)."""
    from spark_llm.ops import after_failure as module

    started: list[str] = []
    monkeypatch.delenv("SPARK_LLM_ROLLBACK", raising=False)
    monkeypatch.setattr(module, "pulumi_process", lambda: PulumiProcess(1, ["pulumi", "up"], "/p"))
    monkeypatch.setattr(module, "start_rollback", lambda *args: started.append("rollback"))
    for on_failure in ("stop", "rollback"):
        said = after_failure({"stack": "sim", "on_failure": on_failure}, served_before=True)
        assert said.startswith("This revision is the one that served last") and "spark-llm rollback" not in said
    assert started == []
