"""The head-side copy (model.source kind head, another directory), run for real between two temp dirs: only what
differs is sent, what the source lacks is removed, a copy that does not match the manifest fails."""

from __future__ import annotations

import json
import os

from spark_llm.plan.weights import steps as weights
from tests.unit.plan.weights_runs import head_copy, model_dir, run_bash


def test_head_copy_sends_only_what_differs_and_removes_what_the_source_lacks(tmp_path, env):
    model_dir(tmp_path / "src", {"a.safetensors": os.urandom(300_000), "sub/config.json": b"{}", "b.txt": b"b"})
    script = head_copy(tmp_path)
    first = run_bash(script, env).stdout
    assert "copy: sending 3 of 3 files" in first
    digest = weights.parse_digest(first)
    assert weights.parse_digest(run_bash(script, env).stdout) == digest
    assert "all 3 files already identical" in run_bash(script, env).stdout

    (tmp_path / "src" / "b.txt").write_bytes(b"B")
    (tmp_path / "dst" / "stale.bin").write_bytes(b"old")
    third = run_bash(script, env).stdout
    assert "copy: sending 1 of 3 files" in third and "removed 1 files the source does not have" in third
    assert not (tmp_path / "dst" / "stale.bin").exists()
    assert (tmp_path / "dst" / "b.txt").read_bytes() == b"B"
    stored = json.loads((tmp_path / "dst" / weights.MANIFEST_NAME).read_text())
    assert stored["digest"] == weights.parse_digest(third) != digest


def test_head_copy_fails_when_the_copy_does_not_match_the_manifest(tmp_path, env):
    model_dir(tmp_path / "src", {"a.bin": b"a" * 1000})
    # An rsync that "succeeds" without copying anything: the verification must catch it.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "rsync").write_text("#!/usr/bin/env bash\nexit 0\n")
    (tmp_path / "bin" / "rsync").chmod(0o755)
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    result = run_bash(head_copy(tmp_path), env, check=False)
    assert result.returncode == 1 and "does not match the source's manifest: a.bin" in result.stderr


def test_head_copy_fails_when_the_source_dir_is_missing(tmp_path, env):
    result = run_bash(head_copy(tmp_path), env, check=False)
    assert result.returncode == 1 and f"model.source.path {tmp_path / 'src'} does not exist" in result.stderr
