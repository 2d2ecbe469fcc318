#!/usr/bin/env python3
"""The operator's loop on a stack of one model and of two (behind the router): this checkout's program against an
earlier commit's, on the simulated cluster, written as JSON.

Usage:   . tools/env.sh && python bench/stack_bench.py --baseline 1530184 [--repeat N] [--rounds N]
Outputs: bench/results/stack-<UTC timestamp>.json (each program's samples and medians, and this / baseline pair by
         pair) and a short table on stdout.

Each round deploys each program in turn on a fresh state of its own (rounds alternate the order, ABBA, so that
drift in the machine's speed hits both alike), times `pulumi preview` and a no-op `pulumi up` N times with one
model, adds a second model on the head and the router (`sim up --load-router`), deploys that, times both again N
times, and destroys. The baseline's program is `git archive`d from this repository beside this venv and sim, as
tests/integration/test_upgrade.py runs an earlier version. Both programs run the same stack file, with the supervisor
set explicitly (--supervisor, on by default as this version's default is; before the stack had one, each model had
its own). Talks only to the sim's containers.
"""

from __future__ import annotations

import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from simbench import REPO, STACK_FILE, bench_parser, file_backend_url, sim_up, summary, write_result
from steady_client import two_models

# What a Pulumi run of the program reads (tests/integration/conftest.py PROGRAM_FILES).
PROGRAM_FILES = ("Pulumi.yaml", "__main__.py", "components", "spark_llm", "scripts")
FIGURES = ("one_model_preview", "one_model_noop_up", "two_models_preview", "two_models_noop_up")


def run(cmd: list[str], env: dict, cwd: Path) -> float:
    """Seconds `cmd` took in `cwd`; the bench stops with its output when it fails."""
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        # Pulumi prints what failed (its Diagnostics) before the outputs, which can be long: that part first.
        said = result.stdout.partition("Diagnostics:")[2].partition("\nOutputs:")[0][-6000:]
        sys.exit(f"{' '.join(cmd)} (in {cwd}) failed:\n{said}\n{result.stdout[-1500:]}\n{result.stderr[-3000:]}")
    return seconds


def checkout(commit: str, directory: Path) -> Path:
    """The program as it was at `commit`, with this venv and sim (the sim's model source is relative: sim/...)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, *PROGRAM_FILES], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    for name in (".venv", "sim"):
        (directory / name).symlink_to(REPO / name)
    return directory


def measure(program: Path, repeat: int, key: str, supervisor: bool) -> dict[str, list[float]]:
    """One program's round on a fresh state: one model, then two behind the router; each figure `repeat` times."""
    got: dict[str, list[float]] = {figure: [] for figure in FIGURES}
    with tempfile.TemporaryDirectory(prefix="spark-llm-stack-bench-") as tmp:
        env = dict(os.environ, PULUMI_BACKEND_URL=file_backend_url(tmp))
        config = Path(tmp) / "Pulumi.sim.yaml"
        stack = ["--stack", "sim", "--non-interactive", "--config-file", str(config)]
        run(["pulumi", "stack", "init", "sim", "--non-interactive"], env, program)
        document = yaml.safe_load(STACK_FILE.read_text())
        router = document["config"].pop("spark-llm:router")  # the second half adds it
        document["config"]["spark-llm:supervisor"] = {"enabled": supervisor}
        config.write_text(yaml.safe_dump(document, sort_keys=False))
        run(["pulumi", "config", "set", "--secret", "apiKey", key, *stack], env, program)
        up = ["pulumi", "up", "--yes", "--skip-preview", *stack]
        try:
            run(up, env, program)
            for _ in range(repeat):
                got["one_model_preview"].append(run(["pulumi", "preview", *stack], env, program))
                got["one_model_noop_up"].append(run(up, env, program))
            document = yaml.safe_load(config.read_text())
            two_models(document["config"])
            document["config"]["spark-llm:router"] = router
            config.write_text(yaml.safe_dump(document, sort_keys=False))
            run(up, env, program)
            for _ in range(repeat):
                got["two_models_preview"].append(run(["pulumi", "preview", *stack], env, program))
                got["two_models_noop_up"].append(run(up, env, program))
        finally:
            destroy = ["pulumi", "destroy", "--yes", "--skip-preview", *stack]
            subprocess.run(destroy, env=env, cwd=program, check=False, capture_output=True)
    return got


def main() -> int:
    ap = bench_parser(__doc__, repeat=3)
    ap.add_argument("--baseline", required=True, help="the commit whose program is the yardstick (e.g. 1530184)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of both programs, alternating the order (2: ABBA)")
    ap.add_argument("--supervisor", choices=("on", "off"), default="on", help="spark-llm:supervisor.enabled for both")
    args = ap.parse_args()
    sim_up(args.workers)
    subprocess.run([str(REPO / "sim/sim"), "up", "--load-router"], check=True, capture_output=True, cwd=REPO)
    key = f"sk-bench-{secrets.token_hex(12)}"
    samples: dict[str, dict[str, list[float]]] = {
        "this": {f: [] for f in FIGURES},
        "baseline": {f: [] for f in FIGURES},
    }
    with tempfile.TemporaryDirectory(prefix="spark-llm-baseline-") as tmp:
        programs = {"this": REPO, "baseline": checkout(args.baseline, Path(tmp))}
        for i in range(args.rounds):
            order = ("this", "baseline") if i % 2 == 0 else ("baseline", "this")
            for name in order:
                print(f"round {i + 1}/{args.rounds}: {name}", flush=True)
                for figure, seconds in measure(programs[name], args.repeat, key, args.supervisor == "on").items():
                    samples[name][figure] += seconds
    subprocess.run([str(REPO / "sim/sim"), "up"], check=True, capture_output=True, cwd=REPO)  # without the router
    result: dict = {"workers": args.workers, "repeat": args.repeat, "rounds": args.rounds, "baseline": args.baseline}
    result["supervisor"] = args.supervisor
    for figure in FIGURES:
        this, base = samples["this"][figure], samples["baseline"][figure]
        ratios = [a / b for a, b in zip(this, base, strict=True)]
        result[figure] = {
            "this": summary(this),
            "baseline": summary(base),
            "ratio_median": round(statistics.median(ratios), 2),
        }
    out = write_result("stack", result)
    for figure in FIGURES:
        row = result[figure]
        print(
            f"{figure:22s} this {row['this']['median_s']:6.2f} s  {args.baseline} {row['baseline']['median_s']:6.2f} s"
            f"  ratio {row['ratio_median']}"
        )
    print(f"written: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
