"""scripts/manifest.py hash: files hashed as they land, so the verification scan after a copy only stats them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spark_llm.plan.scripts import MANIFEST_TOOL


def run(*args: str, cache: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, str(MANIFEST_TOOL), *args],
        input=stdin,
        capture_output=True,
        env=dict(os.environ, XDG_CACHE_HOME=str(cache)),
        check=True,
        timeout=60,
    )


def names(*paths: str) -> bytes:
    return b"".join(p.encode() + b"\0" for p in paths)


def test_files_fed_while_copying_are_found_cached_by_the_verification_scan(tmp_path):
    root = tmp_path / "model"
    (root / "sub").mkdir(parents=True)
    (root / "a.safetensors").write_bytes(os.urandom(300_000))
    (root / "sub" / "b.json").write_bytes(b'{"b": 1}')
    (root / "c.bin").write_bytes(b"c" * 1000)  # not fed: the scan hashes it
    fed = run("hash", str(root), cache=tmp_path / "cache", stdin=names("a.safetensors", "sub/b.json"))
    assert b"hashed 2 files" in fed.stderr

    scan = run("scan", str(root), cache=tmp_path / "cache")
    assert b"hashed 1 (1.0 KB) at " in scan.stderr and b", 2 from cache" in scan.stderr
    cold = run("scan", str(root), cache=tmp_path / "cold")
    assert b"hashed 3 " in cold.stderr
    assert scan.stdout == cold.stdout  # same digest: the cached hashes are the files' own


def test_a_file_rewritten_after_it_was_hashed_is_hashed_again_by_the_scan(tmp_path):
    root = tmp_path / "model"
    root.mkdir()
    (root / "a.bin").write_bytes(b"a" * 1000)
    run("hash", str(root), cache=tmp_path / "cache", stdin=names("a.bin"))
    (root / "a.bin").write_bytes(b"b" * 1000)  # same size: only the stat key (inode, ctime) tells
    scan = run("scan", str(root), cache=tmp_path / "cache")
    assert b"hashed 1 " in scan.stderr
    assert scan.stdout == run("scan", str(root), cache=tmp_path / "cold").stdout


def test_a_name_that_is_gone_is_skipped_and_the_others_are_kept(tmp_path):
    root = tmp_path / "model"
    root.mkdir()
    (root / "a.bin").write_bytes(b"a" * 10)
    fed = run("hash", str(root), cache=tmp_path / "cache", stdin=names("gone.bin", "a.bin"))
    assert b"gone.bin: not hashed" in fed.stderr and b"hashed 1 files" in fed.stderr
    assert b"hashed 0 (0 B), 1 from cache" in run("scan", str(root), cache=tmp_path / "cache").stderr
