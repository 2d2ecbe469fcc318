"""After a failed start: the rollback command names the stack config file the failed `pulumi up` was given."""

from __future__ import annotations

import pytest

from spark_llm.ops.after_failure import after_failure, config_file_of
from spark_llm.remote.pulumi_process import PulumiProcess


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["pulumi", "up", "--config-file", "Pulumi.x.yaml"], "/proj/Pulumi.x.yaml"),
        (["pulumi", "up", "--config-file=/abs/P.yaml", "--yes"], "/abs/P.yaml"),
        (["pulumi", "up", "--yes"], None),
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
