"""What the benchmark scripts share: running commands here, timing them, summarising samples, a sim cluster."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STACK_FILE = REPO / "Pulumi.sim.yaml"


def file_backend_url(directory: Path | str) -> str:
    """Pulumi's file backend in `directory`, as tools/env.sh sets the default one (it says why `metadata=skip`)."""
    return f"file://{directory}?metadata=skip"


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


@contextmanager
def bench_stack() -> Iterator[tuple[dict, list[str], Path]]:
    """Stack `sim` on a private temp state backend with a private copy of the sim's config: (env, the stack
    arguments every pulumi command of the bench takes, the config file)."""
    with tempfile.TemporaryDirectory(prefix="spark-llm-bench-") as tmp:
        env = dict(os.environ, PULUMI_BACKEND_URL=file_backend_url(tmp))
        sh(["pulumi", "stack", "init", "sim", "--non-interactive"], env)
        config = Path(tmp) / "Pulumi.sim.yaml"
        config.write_text(STACK_FILE.read_text())
        yield env, ["--stack", "sim", "--non-interactive", "--config-file", str(config)], config


def serves(outputs: dict, timeout: float = 5) -> bool:
    """One one-token completion from the stack's endpoint answers 200."""
    body = json.dumps({"model": outputs["model"], "prompt": "ping", "max_tokens": 1}).encode()
    request = urllib.request.Request(
        outputs["endpoint"] + "/v1/completions", body, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status == 200
    except OSError:
        return False


def bench_parser(doc: str, repeat: int = 3) -> argparse.ArgumentParser:
    """The options every sim bench takes: --repeat (rounds per method) and --workers (the sim's size)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--workers", type=int, default=1)
    return ap


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
        # The code measured (a result compared with another checkout's must say which each was).
        "commit": sh(["git", "describe", "--always", "--dirty"], dict(os.environ)).stdout.strip(),
        **fields,
    }
    out = REPO / "bench" / "results" / f"{benchmark}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    return out


def _container_cpu_ns(container_id: str) -> int | None:
    """CPU time a container has used (its cgroup: v1 cpuacct or v2 cpu.stat), in ns; None if not found."""
    v1 = Path("/sys/fs/cgroup/cpuacct/docker") / container_id / "cpuacct.usage"
    if v1.exists():
        return int(v1.read_text())
    for v2 in (
        Path("/sys/fs/cgroup/system.slice") / f"docker-{container_id}.scope" / "cpu.stat",
        Path("/sys/fs/cgroup/docker") / container_id / "cpu.stat",
    ):
        if v2.exists():
            usage = dict(line.split() for line in v2.read_text().splitlines())
            return int(usage["usage_usec"]) * 1000
    return None


def _host_busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


class CpuMeter:
    """Where the CPU went during one measured run: seconds per sim node (its container's cgroup, so every
    process on the node counts, short-lived ones too) and how busy the whole machine was (other work included)."""

    def __init__(self) -> None:
        state = json.loads((REPO / ".sim" / "state.json").read_text())
        self.ids: dict[str, str] = {}
        for node in state["nodes"]:
            cid = sh(["docker", "inspect", "-f", "{{.Id}}", node["container"]], dict(os.environ)).stdout.strip()
            self.ids[node["name"]] = cid

    def __enter__(self) -> CpuMeter:
        self.start = {n: _container_cpu_ns(c) for n, c in self.ids.items()}
        self.host = _host_busy_jiffies()
        self.wall = time.perf_counter()
        return self

    def __exit__(self, *_exc: object) -> None:
        wall = time.perf_counter() - self.wall
        busy, total = (b - a for a, b in zip(self.host, _host_busy_jiffies(), strict=True))
        self.result = {
            "node_cpu_s": {
                n: round((_container_cpu_ns(c) or 0) / 1e9 - (self.start[n] or 0) / 1e9, 2)
                for n, c in self.ids.items()
                if self.start[n] is not None
            },
            "machine_busy_pct": round(100 * busy / max(total, 1), 1),
            "wall_s": round(wall, 2),
        }
