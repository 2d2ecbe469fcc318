"""The operator's ssh private key files: a key that group or others may read is refused, as OpenSSH refuses it,
by the program (test_engine_group_graph) and by the operator CLI before it runs any ssh."""

from __future__ import annotations

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.ops import cli
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.ops.status import command as status
from spark_llm.plan import deployment as plan
from spark_llm.plan.hosts import KeyFile
from spark_llm.plan.stack import StackPlan
from spark_llm.remote import key_files
from tests.unit.graph_mocks import FAKE_PRIVATE_KEY


@pytest.fixture
def key(tmp_path):
    path = tmp_path / "id_ed25519"
    path.write_text(FAKE_PRIVATE_KEY)
    return path


@pytest.mark.parametrize(("mode", "refused"), [(0o600, False), (0o400, False), (0o640, True), (0o604, True)])
def test_a_key_is_refused_when_group_or_others_may_read_it(key, mode, refused):
    key.chmod(mode)
    problem = key_files.unprotected(KeyFile(str(key), "spark-llm:sshKeyPath"))
    assert (problem is not None) == refused
    if refused:
        assert problem == (
            f"spark-llm:sshKeyPath: the ssh private key {key} is open to group or others (mode {mode:04o}); ssh refuses"
            f" it (UNPROTECTED PRIVATE KEY FILE). Run `chmod 600 {key}`"
        )


def test_the_error_names_the_nodes_own_key_path(key, raw_config):
    key.chmod(0o644)
    raw_config["nodes"][1]["keyPath"] = str(key)
    with pytest.raises(key_files.KeyFileError, match=r"spark-llm:nodes\[1\]\.keyPath: the ssh private key .* 0644"):
        key_files.check_keys(plan.key_files(parse(raw_config)))


def test_the_cli_refuses_an_unprotected_key_before_any_ssh(key, raw_config, monkeypatch, capfd):
    key.chmod(0o644)
    raw_config["sshKeyPath"] = str(key)
    deployment = plan.build_plan(groups(parse(raw_config))[0], plan.LAUNCH_TEMPLATE.read_text())
    monkeypatch.setattr(PulumiCli, "load_stack", lambda self: StackPlan.one(deployment))
    monkeypatch.setattr(status, "run", lambda *args: pytest.fail("status ran with an unprotected key"))
    assert cli.main(["status", "--stack", "dual-spark"]) == 2
    assert f"spark-llm status: spark-llm:sshKeyPath: the ssh private key {key}" in capfd.readouterr().err


def test_the_cli_names_a_missing_key_file_as_preview_does_before_any_ssh(tmp_path, raw_config, monkeypatch, capfd):
    # Was: "key refused ... Permission denied" from ssh for the head, a kex error for the worker.
    missing = tmp_path / "no-such-key"
    raw_config["sshKeyPath"] = str(missing)
    deployment = plan.build_plan(groups(parse(raw_config))[0], plan.LAUNCH_TEMPLATE.read_text())
    monkeypatch.setattr(PulumiCli, "load_stack", lambda self: StackPlan.one(deployment))
    monkeypatch.setattr(status, "run", lambda *args: pytest.fail("status ran without its key file"))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path / "agent.sock"))
    assert cli.main(["status", "--stack", "dual-spark"]) == 2
    err = capfd.readouterr().err
    with pytest.raises(key_files.KeyFileError) as preview:
        key_files.read_keys(deployment.key_files)  # what the program (preview, up) says of it
    assert err == f"spark-llm status: {preview.value}\n"
    assert f"spark-llm:sshKeyPath: cannot read the ssh private key {missing}: No such file or directory" in err
    assert "a key held only in ssh-agent is not enough" in err
