"""The rsync transport the weights steps share (spark_llm.plan.weights.sync), for real: the progress lines, and
an interrupted copy resumed from its partial file."""

from __future__ import annotations

import os
import re
import signal
import subprocess

from spark_llm.plan.weights import sync as weights_sync
from tests.unit.plan.weights_runs import model_dir, run_bash
from tests.waits import wait_for


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
