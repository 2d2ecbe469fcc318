"""The test bed's own `pulumi config set --path` (conftest.set_config_path, which saves a CLI start per key) writes
what the real CLI writes: the same keys, nesting and types, for every shape of path and value the tests use."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.integration.conftest import REPO, backend_env, run, set_config_path

pytestmark = pytest.mark.integration

CASES = [
    ("engine.env.STANDIN_CRASH_AT_INIT", "1"),
    ("timeouts.startupGraceSeconds", "5"),
    ("model.purgeOnDestroy", "true"),
    ("supervisor.enabled", "false"),
    ("model.source.path", "/srv/models/it weights"),
    ("nodes[0].hostKey", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 head"),
    ("nodes[1].name", "worker-1"),
    ("spark-llm:image.ref", "registry.local/standin:v2"),
    ("engine.env.ZERO_PADDED", "007"),
    ("engine.env.NEGATIVE", "-3"),
    ("engine.env.FRACTION", "1.5"),
    ("engine.env.WORD", "null"),
    ("engine.env.EMPTY", ""),
    ("engine.env.SPARK_LLM_OPERATOR", "two"),
    ("timeouts.readySeconds", "0"),
]


def test_the_harness_writes_config_as_the_cli_does(tmp_path):
    shutil.copy(REPO / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    env = backend_env(tmp_path)
    run(["pulumi", "stack", "init", "t", "--non-interactive"], env=env, cwd=tmp_path)
    ours: dict = {}
    for path, value in CASES:
        run(["pulumi", "config", "set", "--path", "--stack", "t", path, "--", value], env=env, cwd=tmp_path)
        set_config_path(ours, path, value)
    theirs = yaml.safe_load((tmp_path / "Pulumi.t.yaml").read_text())["config"]
    assert ours == theirs
