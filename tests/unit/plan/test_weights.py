"""Weights: the rendered scripts (bash -n, shellcheck, run for real where no node is needed) and the manifest tool.

The manifest tool runs for real on temp dirs; the head-side copy (kind head elsewhere) runs for real between two
temp dirs, and rsync's resume is shown on a genuinely interrupted local copy. What needs a node (the fabric,
the upload over ssh) is covered by tests/integration/test_weights.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_llm import config
from spark_llm.plan import deployment as plan
from spark_llm.plan import weights, weights_sync
from spark_llm.plan.drift import step_token
from spark_llm.plan.observation import NodeObservation, parse_probe
from spark_llm.plan.weights_fanout import fanout_sources, render_fanout
from tests.conftest import dual_spark_raw
from tests.waits import wait_for

TOOL = weights.MANIFEST_TOOL_PATH.read_text()
TEMPLATE = plan.TEMPLATE_PATH.read_text()
REVISION = "0123456789abcdef0123456789abcdef01234567"
HF = {"kind": "huggingface", "repo": "Qwen/Qwen3.5-122B-A10B-FP8", "revision": REVISION}
TOKEN = "tok-1"
FANOUT = fanout_sources()
TOKENS = {"spark-2": "tok-2"}
DIGEST_LINE = re.compile(r"^spark-llm-manifest [0-9a-f]{64} \d+ \d+$")


def build(source: dict | None = None, *, path: str | None = None, purge: bool = False):
    raw = dual_spark_raw()
    if source is not None:
        raw["model"]["source"] = source
    if path is not None:
        raw["model"]["path"] = path
    raw["model"]["purgeOnDestroy"] = purge
    cfg = config.parse(raw)
    return cfg, plan.build_plan(cfg, TEMPLATE)


def run_bash(script: str, env: dict, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    # The same strict mode spark_llm.remote.ssh puts ahead of every script.
    result = subprocess.run(
        ["bash", "-s"], input="set -euo pipefail\n" + script, capture_output=True, text=True, env=env, timeout=120
    )
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def tool(*args: str, env: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(weights.MANIFEST_TOOL_PATH), *args], capture_output=True, text=True, env=env, check=True
    )


@pytest.fixture
def env(tmp_path) -> dict:
    """A private manifest cache for the test."""
    return dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))


def model_dir(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


# ---------- rendered scripts ----------


def all_scripts() -> list[tuple[str, str]]:
    out = []
    for kind, source in (("huggingface", HF), ("head-same", None), ("head-other", {"kind": "head", "path": "/d/s"})):
        cfg, p = build(source, purge=True)
        out += [
            (f"{kind}/obtain", weights.render_obtain(cfg, p.head, TOOL, TOKEN)),
            (f"{kind}/head-probe", weights.render_probe(cfg, p.head, TOOL)),
            (f"{kind}/fanout", render_fanout(cfg, p.head, list(p.workers), TOOL, FANOUT, TOKENS, "weights")),
            (f"{kind}/worker-probe", weights.render_probe(cfg, p.workers[0], TOOL)),
            (f"{kind}/worker-retention", weights.render_retention(cfg, p.workers[0], TOOL)),
            (f"{kind}/head-retention", weights.render_retention(cfg, p.head, TOOL)),
            (f"{kind}/head-update", weights.head_digest_command(cfg)),
        ]
    cfg, p = build({"kind": "local", "path": "/tmp"})
    out += [("local/upload", weights.render_upload(cfg, p.head, TOOL, "/tmp/model dir", TOKEN))]
    return out


@pytest.mark.parametrize(("name", "script"), all_scripts(), ids=[n for n, _ in all_scripts()])
def test_rendered_script_is_valid_bash(name, script, tmp_path):
    path = tmp_path / "script.sh"
    path.write_text("set -euo pipefail\n" + script)
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck"):
        # SC2034: shared snippets (fabric_ssh_setup) define variables a check script does not use.
        lint = subprocess.run(["shellcheck", "-s", "bash", "-e", "SC2034", str(path)], capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout


def test_hf_download_pins_repo_and_revision_into_model_path():
    cfg, p = build(HF)
    script = weights.render_obtain(cfg, p.head, TOOL, TOKEN)
    assert "MODEL_PATH=/home/aurora/models/Qwen3.5-122B-A10B-FP8\n" in script
    assert f'"${{HF[@]}}" Qwen/Qwen3.5-122B-A10B-FP8 --revision {REVISION} --local-dir "$MODEL_PATH"' in script
    assert "HF=(hf download)" in script and "HF=(huggingface-cli download)" in script
    assert "HF_ENV=/home/aurora/spark-llm/hf.env\n" in script


def fake_hf(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "hf").write_text("#!/usr/bin/env bash\n" + body)
    (bin_dir / "hf").chmod(0o755)


def test_hf_token_comes_from_the_env_file_and_never_from_argv(tmp_path, env):
    cfg, p = build(HF, path=str(tmp_path / "model"))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    (tmp_path / "remote").mkdir()
    env_file = Path(weights.hf_env_path(head))
    env_file.write_text(weights.render_hf_env("hf_TOPSECRET"))
    env_file.chmod(0o600)
    # A stand-in `hf`: records its argv and whether it saw the token, writes one weights file.
    fake_hf(
        tmp_path / "bin",
        'printf "%s\\n" "$@" > "$0.argv"; echo "token=${HF_TOKEN:-none}" > "$0.env"\n'
        'dir=${@: -1}; mkdir -p "$dir/.cache/huggingface"; echo w > "$dir/model.safetensors"\n',
    )
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    out = run_bash(weights.render_obtain(cfg, head, TOOL, TOKEN), env).stdout
    argv = (tmp_path / "bin" / "hf.argv").read_text().split("\n")
    assert argv[:6] == [
        "download",
        "Qwen/Qwen3.5-122B-A10B-FP8",
        "--revision",
        REVISION,
        "--local-dir",
        str(tmp_path / "model"),
    ]
    assert "hf_TOPSECRET" not in "".join(argv) and "hf_TOPSECRET" not in out
    assert (tmp_path / "bin" / "hf.env").read_text().strip() == "token=hf_TOPSECRET"
    # The download metadata is not part of the manifest; the manifest is stored beside the weights.
    stored = json.loads((tmp_path / "model" / weights.MANIFEST_NAME).read_text())
    assert [f["path"] for f in stored["files"]] == ["model.safetensors"]
    assert weights.parse_digest(out) == stored["digest"]


def test_download_rerun_lets_hf_resume_and_hashes_only_new_files(tmp_path, env):
    """A second `up` after an interrupted download runs `hf download` again (it skips finished files itself) and
    the manifest re-hashes only what the download added."""
    cfg, p = build(HF, path=str(tmp_path / "model"))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    # A stand-in `hf` that fetches one more shard per call, as a resumed download does.
    fake_hf(
        tmp_path / "bin",
        'dir=${@: -1}; mkdir -p "$dir"; n=$(find "$dir" -name "*.safetensors" | wc -l)\n'
        'head -c 100000 /dev/urandom > "$dir/model-$((n + 1)).safetensors"\n',
    )
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    script = weights.render_obtain(cfg, head, TOOL, TOKEN)
    first = run_bash(script, env)
    second = run_bash(script, env)
    assert "hashed 1 " in second.stderr and "1 from cache" in second.stderr
    assert weights.parse_digest(second.stdout) != weights.parse_digest(first.stdout)
    stored = json.loads((tmp_path / "model" / weights.MANIFEST_NAME).read_text())
    assert [f["path"] for f in stored["files"]] == ["model-1.safetensors", "model-2.safetensors"]


def test_failed_download_shows_its_log_and_says_it_resumes(tmp_path, env):
    cfg, p = build(HF, path=str(tmp_path / "model"))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    fake_hf(tmp_path / "bin", 'printf "Fetching 3 files:  33%%\\r"; echo "HTTP 401 for url"; exit 1\n')
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    result = run_bash(weights.render_obtain(cfg, head, TOOL, TOKEN), env, check=False)
    assert result.returncode == 1
    assert "HTTP 401 for url" in result.stderr and "run pulumi up again to resume" in result.stderr


def test_upload_reaches_the_head_with_the_pinned_ssh_config_directly():
    cfg, p = build({"kind": "local", "path": "/tmp"})
    script = weights.render_upload(cfg, p.head, TOOL, "/tmp/model dir", TOKEN)
    assert "SRC='/tmp/model dir'" in script
    # The pinned ssh command comes from the environment (components.connection.ssh_command), not the script.
    assert 'mapfile -t SSH <<<"${SPARK_LLM_SSH:?' in script and 'REMOTE=("${SSH[@]}" "$SSH_TARGET")' in script
    assert "eval" not in script
    assert f'RSH_ARGS=(-e "$ssh_wrapper -c {weights_sync.BULK_CIPHER}")' in script and 'DEST="$SSH_TARGET:"' in script
    assert "ProxyJump" not in script and " -J " not in script and "PRIVATE KEY" not in script


def test_upload_ssh_wrapper_passes_every_pinned_option_through_to_ssh(tmp_path):
    """rsync splits -e itself: the wrapper must hand ssh each option exactly, spaces and quotes included."""
    from components.connection import ssh_command

    cfg, p = build({"kind": "local", "path": "/tmp"})
    argv = ssh_command(p.workers[0].ssh)  # the worker's: a ProxyCommand with nested quoting
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ssh").write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$STUB_ARGS"\n')
    (bin_dir / "ssh").chmod(0o755)
    transport = weights_sync.from_operator(p.head)
    script = transport.runner + transport.rsync + '"$ssh_wrapper" aurora@head true\n'
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        STUB_ARGS=str(tmp_path / "args"),
        SPARK_LLM_SSH="\n".join(argv),
        SPARK_LLM_SSH_TARGET="aurora@head",
    )
    run_bash(script, env)
    assert (tmp_path / "args").read_text().splitlines() == [*argv[1:], "aurora@head", "true"]


@pytest.mark.parametrize(
    ("stdout", "digest"),
    [
        (None, ""),
        ("", ""),
        ("copy: sent\nspark-llm-manifest " + "a" * 64 + " 3 10\n", "a" * 64),
        ("spark-llm-manifest " + "a" * 64 + " 1 1\nspark-llm-manifest " + "b" * 64 + " 1 1\n", "b" * 64),
        ("weights: failed\n", ""),
    ],
)
def test_parse_digest_reads_the_last_manifest_line(stdout, digest):
    assert weights.parse_digest(stdout) == digest


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
    assert weights.purges(cfg, target) == delete
    script = weights.render_retention(cfg, target, TOOL)
    assert says in script and ('"$tool" purge' in script) == delete


def retention_run(tmp_path: Path, env: dict, *, purge: bool, phase: str) -> subprocess.CompletedProcess[str]:
    cfg, p = build(path=str(tmp_path / "model"), purge=purge)
    worker = dataclasses.replace(p.workers[0], remote_dir=str(tmp_path / "remote"))
    return run_bash(f"SPARK_LLM_PHASE={phase}\n" + weights.render_retention(cfg, worker, TOOL), env)


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


def test_tool_with_the_heredoc_delimiter_is_refused():
    cfg, p = build()
    with pytest.raises(ValueError, match="delimiter"):
        weights.render_probe(cfg, p.head, "print(1)\nSPARK_LLM_MANIFEST_PY\n")


# ---------- drift: the probe sections and the recorded token ----------


def test_probe_prints_the_live_digest_of_model_path_and_of_the_heads_source(tmp_path, env):
    src = model_dir(tmp_path / "src", {"a.bin": b"a"})
    cfg, p = build({"kind": "head", "path": str(src)}, path=str(tmp_path / "dst"))
    head_out = run_bash(weights.render_probe(cfg, p.head, TOOL), env).stdout
    facts = parse_probe("spark-1", head_out).facts
    empty = tool("scan", str(tmp_path / "dst"), env=env).stdout.split()[1]  # not there yet: the empty manifest
    assert facts == {"weights": empty, "weights-source": tool("scan", str(src), env=env).stdout.split()[1]}
    assert weights.live_value(cfg, p.head, facts) == f"{facts['weights']}/{facts['weights-source']}"
    worker_facts = parse_probe("spark-2", run_bash(weights.render_probe(cfg, p.workers[0], TOOL), env).stdout).facts
    assert list(worker_facts) == ["weights"]  # a worker has no source dir
    assert weights.live_value(cfg, p.workers[0], worker_facts) == empty


@pytest.mark.parametrize(
    ("facts", "expected"),
    [({}, None), ({"weights": "d1"}, "d1"), ({"weights": "d1", "weights-source": "s1"}, "d1")],
)
def test_live_value_of_a_worker(facts, expected):
    cfg, p = build()
    assert weights.live_value(cfg, p.workers[0], facts) == expected


def test_head_copy_records_its_token_with_what_the_probe_then_reads(tmp_path, env):
    """A no-op next time: the recorded value is the live value the probe computes (spark_llm.plan.drift)."""
    model_dir(tmp_path / "src", {"a.bin": b"a"})
    src, dst = tmp_path / "src", tmp_path / "dst"
    cfg, p = build({"kind": "head", "path": str(src)}, path=str(dst))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    run_bash(weights.render_obtain(cfg, head, TOOL, TOKEN), env)
    recorded = (tmp_path / "remote" / "state" / "weights").read_text().strip()
    facts = parse_probe("spark-1", run_bash(weights.render_probe(cfg, head, TOOL), env).stdout).facts
    observation = NodeObservation(node="spark-1", tokens={"weights": recorded}, facts=facts)
    assert step_token(observation, "weights", weights.live_value(cfg, head, facts)) == (TOKEN, None)
    (src / "a.bin").write_bytes(b"changed")  # the source dir drifted: the head copy is repaired
    facts = parse_probe("spark-1", run_bash(weights.render_probe(cfg, head, TOOL), env).stdout).facts
    token, why = step_token(observation, "weights", weights.live_value(cfg, head, facts))
    assert token.startswith("repair-") and why and "weights on spark-1: now" in why


def test_head_copy_update_reprints_the_digest_from_the_stored_manifest(tmp_path, env):
    model_dir(tmp_path / "src", {"a.bin": b"a"})
    script = head_copy(tmp_path)
    digest = weights.parse_digest(run_bash(script, env).stdout)
    cfg, _ = build({"kind": "head", "path": str(tmp_path / "src")}, path=str(tmp_path / "dst"))
    out = subprocess.run(["bash", "-c", weights.head_digest_command(cfg)], capture_output=True, text=True, check=True)
    assert weights.parse_digest(out.stdout) == digest and "connection settings recorded" in out.stdout


# ---------- run for real: the head-side copy (kind head, another directory) ----------


def head_copy(tmp_path: Path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    cfg, p = build({"kind": "head", "path": str(src)}, path=str(dst))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    return weights.render_obtain(cfg, head, TOOL, TOKEN)


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


def test_progress_lines_are_short_and_come_every_few_seconds(tmp_path):
    # A stand-in rsync writing --info=progress2 lines with \r for ~2.4 s; one progress line a second.
    log = tmp_path / "rsync.log"
    script = (
        weights_sync.COMMON.replace(f"PROGRESS_SECONDS={weights_sync.PROGRESS_SECONDS}", "PROGRESS_SECONDS=1")
        + f"RSYNC_LOG={log}\nWHAT=worker-1\n"
        + "(for i in 1 2 3 4 5 6; do printf '  %s,000,000  %s%%  640.00MB/s    0:00:0%s  ' $((i * 200)) $((i * 16)) "
        '$((6 - i)) >> "$RSYNC_LOG"; printf \'\\r\' >> "$RSYNC_LOG"; sleep 0.4; done) &\n'
        "watch_progress $! rsync_progress\n"
    )
    lines = run_bash(script, dict(os.environ)).stdout.splitlines()
    assert 1 <= len(lines) <= 3, lines
    assert re.match(r"^worker-1: \d+% [0-9.]+[kMG]?B 640.00MB/s 0:00:0\d left$", lines[0]), lines
    assert all(len(line) < 80 for line in lines)


# ---------- manifest tool, for real ----------


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


# ---------- rsync resume, for real between two temp dirs ----------


def test_interrupted_copy_resumes_from_the_partial_file(tmp_path):
    """What the sync scripts rely on: an interrupted `rsync --partial-dir` keeps the partial file aside, and the
    next run sends only the rest (delta transfer against it: --no-whole-file is what a network copy does)."""
    src, dst = model_dir(tmp_path / "src", {"big.bin": os.urandom(4 << 20)}), tmp_path / "dst"
    dst.mkdir()
    (tmp_path / "list").write_bytes(b"big.bin\0")
    argv = [
        "rsync",
        *weights_sync.RSYNC_OPTIONS,
        "--no-whole-file",
        f"--files-from={tmp_path / 'list'}",
        f"{src}/",
        f"{dst}/",
    ]
    proc = subprocess.Popen([*argv, "--bwlimit=2000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def receiving() -> bool:
        """rsync's temp file of big.bin (`.big.bin.XXXXXX` in the target) holds a part of it."""
        assert proc.poll() is None, f"rsync ended (exit {proc.returncode}) before it could be interrupted mid-file"
        try:
            return any(p.stat().st_size >= 256 << 10 for p in dst.glob(".big.bin.*"))
        except FileNotFoundError:  # renamed into place meanwhile: the next poll's assert says so
            return False

    wait_for("rsync receiving the first 256 KiB of big.bin", receiving, timeout_s=10, interval_s=0.05)
    proc.send_signal(signal.SIGINT)  # SIGINT, as when an operator interrupts `pulumi up` or the link drops
    proc.wait(timeout=10)
    assert proc.returncode != 0
    partial = dst / weights_sync.PARTIAL_DIR / "big.bin"
    assert partial.exists() and 0 < partial.stat().st_size < 4 << 20
    kept = partial.stat().st_size

    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    literal = int(re.search(r"Literal data: ([\d,]+)", out).group(1).replace(",", ""))
    matched = int(re.search(r"Matched data: ([\d,]+)", out).group(1).replace(",", ""))
    assert matched >= kept - 64 * 1024 and literal <= (4 << 20) - kept + 64 * 1024
    assert (dst / "big.bin").read_bytes() == (src / "big.bin").read_bytes()
    assert not (dst / weights_sync.PARTIAL_DIR).exists()
