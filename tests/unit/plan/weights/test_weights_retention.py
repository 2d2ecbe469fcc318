"""What `pulumi destroy` deletes: the weights only when purgeOnDestroy is on and the copy is ours, and a replaced
retention setting deletes nothing."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from spark_llm.plan.weights import retention
from tests.unit.plan.weights_runs import HF, TOOL, build, model_dir, run_bash, tool


@pytest.mark.parametrize(
    ("source", "purge", "node", "delete", "says"),
    [
        (None, False, "worker", False, "kept on pulumi destroy"),
        (None, True, "worker", True, "deleted by pulumi destroy"),
        (None, True, "head", False, "the source itself, never deleted"),
        (HF, True, "head", True, "deleted by pulumi destroy"),
        (HF, False, "head", False, "kept on pulumi destroy"),
        ({"kind": "head", "path": "/data/src"}, True, "head", True, "deleted by pulumi destroy"),
    ],
)
def test_weights_are_deleted_on_destroy_only_when_purged_and_ours(source, purge, node, delete, says):
    cfg, p = build(source, purge=purge)
    target = p.head if node == "head" else p.workers[0]
    assert retention.purges(cfg, target) == delete
    script = retention.render_retention(cfg, target, TOOL)
    assert says in script and ('"$tool" purge' in script) == delete


def retention_run(tmp_path: Path, env: dict, *, purge: bool, phase: str) -> subprocess.CompletedProcess[str]:
    cfg, p = build(path=str(tmp_path / "model"), purge=purge)
    worker = dataclasses.replace(p.workers[0], remote_dir=str(tmp_path / "remote"))
    return run_bash(f"SPARK_LLM_PHASE={phase}\n" + retention.render_retention(cfg, worker, TOOL), env)


def test_destroy_purges_but_a_replaced_retention_setting_deletes_nothing(tmp_path, env):
    model_dir(tmp_path / "model", {"w.safetensors": b"w"})
    tool("scan", str(tmp_path / "model"), "--write", env=env)
    assert "deleted by pulumi destroy" in retention_run(tmp_path, env, purge=True, phase="create").stdout
    # purgeOnDestroy turned off: the new resource is created, then the old one (which purges) is deleted.
    retention_run(tmp_path, env, purge=False, phase="create")
    assert "nothing deleted" in retention_run(tmp_path, env, purge=True, phase="delete").stdout
    assert (tmp_path / "model" / "w.safetensors").exists()
    # On again, then a destroy: the resource's own mark, so it purges.
    retention_run(tmp_path, env, purge=True, phase="create")
    retention_run(tmp_path, env, purge=True, phase="delete")
    assert not (tmp_path / "model").exists()
