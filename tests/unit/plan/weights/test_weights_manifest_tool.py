"""The manifest tool (scripts/manifest.py), run for real on temp dirs: what it lists, its hash cache, diff and
purge, the hashing rate."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time

from spark_llm.plan.weights import steps as weights
from tests.unit.plan.weights_runs import model_dir, tool

DIGEST_LINE = re.compile(r"^spark-llm-manifest [0-9a-f]{64} \d+ \d+$")


def test_manifest_lists_path_size_sha256_and_skips_its_own_files(tmp_path, env):
    root = model_dir(
        tmp_path / "m",
        {
            "model.safetensors": b"weights",
            "nested/.cache/kept": b"k",
            ".cache/huggingface/download/x.metadata": b"meta",
            ".spark-llm-partial/model.safetensors": b"wei",
            weights.MANIFEST_NAME: b"{}",
        },
    )
    doc = json.loads(tool("scan", str(root), "--json", env=env).stdout)
    assert doc["files"] == [
        {"path": "model.safetensors", "size": 7, "sha256": hashlib.sha256(b"weights").hexdigest()},
        {"path": "nested/.cache/kept", "size": 1, "sha256": hashlib.sha256(b"k").hexdigest()},
    ]
    line = tool("scan", str(root), env=env).stdout.strip()
    assert DIGEST_LINE.match(line) and line.split()[1] == doc["digest"]


def test_manifest_cache_hit_does_not_rehash(tmp_path, env):
    root = model_dir(tmp_path / "m", {"a.bin": os.urandom(100_000), "b.bin": os.urandom(100_000)})
    first = tool("scan", str(root), env=env)
    assert "hashed 2 " in first.stderr and "0 from cache" in first.stderr
    second = tool("scan", str(root), env=env)
    assert "hashed 0 (0 B), 2 from cache" in second.stderr
    assert second.stdout == first.stdout


def test_a_scan_that_finds_the_same_manifest_leaves_the_stored_one_untouched(tmp_path, env):
    # A copy run again (its program changed, say) that moves nothing leaves every file as it was, inode and times.
    root = model_dir(tmp_path / "m", {"a.bin": b"a"})
    tool("scan", str(root), "--write", env=env)
    stored = root / weights.MANIFEST_NAME
    before = stored.stat()
    tool("scan", str(root), "--write", env=env)
    after = stored.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_ctime_ns) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_ctime_ns,
    )
    (root / "a.bin").write_bytes(b"b")
    tool("scan", str(root), "--write", env=env)
    assert stored.stat().st_ino != before.st_ino  # a new manifest is written (atomically: a new file)


def test_changed_file_changes_the_digest_and_only_it_is_rehashed(tmp_path, env):
    root = model_dir(tmp_path / "m", {"a.bin": b"a" * 1000, "b.bin": b"b" * 1000})
    before = tool("scan", str(root), env=env).stdout
    (root / "b.bin").write_bytes(b"B" * 1000)
    after = tool("scan", str(root), env=env)
    assert "hashed 1 " in after.stderr and "1 from cache" in after.stderr
    assert after.stdout.split()[1] != before.split()[1]


def test_rewritten_file_with_the_same_size_and_mtime_is_rehashed(tmp_path, env):
    """rsync -a restores mtimes: a re-copied file must not be trusted from the cache on (size, mtime) alone."""
    root = model_dir(tmp_path / "m", {"a.bin": b"a" * 1000})
    before = tool("scan", str(root), env=env).stdout
    st = (root / "a.bin").stat()
    time.sleep(0.01)
    (root / "a.bin").write_bytes(b"x" * 1000)
    os.utime(root / "a.bin", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (root / "a.bin").stat().st_mtime_ns == st.st_mtime_ns
    after = tool("scan", str(root), env=env).stdout
    assert after.split()[1] != before.split()[1]


def test_missing_directory_is_an_empty_manifest(tmp_path, env):
    assert tool("scan", str(tmp_path / "nope"), env=env).stdout.split()[2:] == ["0", "0"]


def test_diff_sends_missing_and_different_files_and_lists_extras(tmp_path, env):
    src = model_dir(tmp_path / "src", {"same": b"1", "changed": b"new", "missing": b"m"})
    dst = model_dir(tmp_path / "dst", {"same": b"1", "changed": b"old", "extra": b"x"})
    (tmp_path / "s.json").write_text(tool("scan", str(src), "--json", env=env).stdout)
    (tmp_path / "d.json").write_text(tool("scan", str(dst), "--json", env=env).stdout)
    send, extra = tmp_path / "send", tmp_path / "extra"
    out = tool(
        "diff", str(tmp_path / "s.json"), str(tmp_path / "d.json"), "--send", str(send), "--extra", str(extra), env=env
    )
    _, total_files, total_bytes, send_files, send_bytes, extra_files = out.stdout.split()
    assert (total_files, total_bytes, send_files, send_bytes, extra_files) == ("3", "5", "2", "4", "1")
    assert send.read_bytes().split(b"\0")[:-1] == [b"changed", b"missing"]
    assert extra.read_bytes() == b"extra\0"


def test_purge_deletes_only_what_the_manifest_lists(tmp_path, env):
    root = model_dir(tmp_path / "m", {"model.safetensors": b"w", "sub/tokenizer.json": b"t"})
    tool("scan", str(root), "--write", env=env)
    (root / "notes.txt").write_text("the operator's own file")
    (root / ".spark-llm-partial").mkdir()
    (root / ".spark-llm-partial" / "x").write_bytes(b"partial")
    tool("purge", str(root), env=env)
    assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]
    (root / "notes.txt").unlink()
    tool("scan", str(root), "--write", env=env)
    tool("purge", str(root), env=env)
    assert not root.exists()


def test_manifest_hashing_rate_is_reported(tmp_path, env):
    root = model_dir(tmp_path / "m", {"big.bin": os.urandom(8 << 20)})
    summary = tool("scan", str(root), env=env).stderr
    assert re.search(r"hashed 1 \(8\.4 MB\) at [0-9.]+ [KMG]B/s", summary), summary
