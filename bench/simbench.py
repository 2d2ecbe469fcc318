"""What the benchmark scripts share: running commands here, timing them, summarising samples, a sim cluster."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STACK_FILE = REPO / "Pulumi.sim.yaml"


def sh(cmd: list[str], env: dict, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def timed(cmd: list[str], env: dict, check: bool = True) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    result = sh(cmd, env, check)
    return time.perf_counter() - start, result


def summary(samples: list[float]) -> dict:
    return {
        "samples_s": [round(s, 2) for s in samples],
        "median_s": round(statistics.median(samples), 2),
        "min_s": round(min(samples), 2),
        "max_s": round(max(samples), 2),
    }


def sim_up(workers: int) -> None:
    """The sim with `workers` workers and the stand-in image on every node (benchmarks time the rest)."""
    image = sh([str(REPO / "sim/engine/build-image.sh")], dict(os.environ)).stdout.strip().splitlines()[-1]
    sh(
        [
            str(REPO / "sim/sim"),
            "up",
            "--workers",
            str(workers),
            "--load-image",
            image,
            "--load-on",
            "all",
            "--image-tag",
            "spark-llm/standin-engine:sim",
        ],
        dict(os.environ),
    )


def write_result(benchmark: str, fields: dict) -> Path:
    """bench/results/<benchmark>-<UTC timestamp>.json: the machine, the Pulumi CLI, then `fields`."""
    now = datetime.now(UTC)
    result = {
        "benchmark": benchmark,
        "when": now.isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "pulumi": sh(["pulumi", "version"], dict(os.environ)).stdout.strip(),
        **fields,
    }
    out = REPO / "bench" / "results" / f"{benchmark}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    return out
