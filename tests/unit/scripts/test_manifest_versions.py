"""scripts/manifest.py keep / restore (issue 31, 1): the version a copy replaces stays whole as hard links, and a
rollback puts it back without copying a byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[3] / "scripts" / "manifest.py"


def tool(*args: str, env: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, env=env, check=True)


def replace(path: Path, data: bytes) -> None:
    """As rsync writes a file: a new one renamed over the old (the old inode, kept as a hard link, stays whole)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_a_kept_version_survives_a_copy_and_comes_back_without_a_byte_copied(tmp_path: Path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "a.safetensors").write_bytes(b"A" * 1000)
    (model / "sub" / "b.json").write_bytes(b"{}")
    old = tool("scan", str(model), "--write", env=env).stdout.split()[1]
    tool("keep", str(model), env=env)
    inode = (model / "a.safetensors").stat().st_ino
    # The relaunch's copy: a file changed, one added; then its manifest stored.
    replace(model / "a.safetensors", b"B" * 1000)
    (model / "c.safetensors").write_bytes(b"C")
    new = tool("scan", str(model), "--write", env=env).stdout.split()[1]
    assert new != old

    restored = tool("restore", str(model), old, env=env)
    assert restored.stdout.split()[:2] == ["spark-llm-manifest", old]
    assert (model / "a.safetensors").read_bytes() == b"A" * 1000
    assert (model / "a.safetensors").stat().st_ino == inode  # the kept file itself: no copy
    assert not (model / "c.safetensors").exists()
    assert json.loads((model / ".spark-llm-manifest.json").read_text())["digest"] == old
    again = tool("scan", str(model), env=env)
    assert again.stdout.split()[1] == old and "hashed 0 " in again.stderr  # the cache knows the relinked files


def test_files_that_are_not_the_verified_version_are_not_kept_and_an_unkept_version_is_refused(tmp_path: Path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    model = tmp_path / "model"
    model.mkdir()
    (model / "a.safetensors").write_bytes(b"A")
    tool("scan", str(model), "--write", env=env)
    replace(model / "a.safetensors", b"half")  # a copy cut short: the files no longer match the stored manifest
    kept = tool("keep", str(model), env=env)
    assert "not the verified version" in kept.stderr and not (model / ".spark-llm-versions").exists()
    refused = subprocess.run(
        [sys.executable, str(TOOL), "restore", str(model), "f" * 64], capture_output=True, text=True, env=env
    )
    assert refused.returncode != 0 and "is not kept on this node" in refused.stderr
    assert (model / "a.safetensors").read_bytes() == b"half"  # nothing changed
