#!/usr/bin/env python3
"""Milliseconds the memory admission costs per node on the simulated cluster: the probe alone (one ssh session
running the memory probe), the probe and the verdict (parse + judge), and the admission step as `pulumi up` runs it
(`python -m spark_llm.ops.admission`: a Python start, the probe over ssh, the verdict), side by side, as JSON.

Usage:   . tools/env.sh && python bench/admission_bench.py [--repeat N] [--workers N]
Outputs: bench/results/admission-<UTC timestamp>.json and a short table on stdout.

Each node's memory is the sim's knob (`sim memory`: a Spark's 121 GiB, 10 GiB free, 100 GiB of page cache) and a
process holding GPU memory (`sim gpu-process`), so the probe reads what a Spark's would, nvidia-smi included; the
verdict is a refusal (vLLM 0.16 judges MemFree). The ssh master connection is warmed first, as the program's own
probe leaves it for the admission step (spark_llm.remote.ssh). The methods alternate, so machine noise hits them
alike. Talks only to the sim's containers. Absolute numbers depend on the machine; compare within one file.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402

from bench.simbench import REPO, STACK_FILE, bench_parser, sh, sim_up, write_result  # noqa: E402
from spark_llm import config  # noqa: E402
from spark_llm.config.group import groups  # noqa: E402
from spark_llm.plan import deployment as plan  # noqa: E402
from spark_llm.plan import memory  # noqa: E402
from spark_llm.plan.observation import parse_probe  # noqa: E402
from spark_llm.remote.runner import run_script  # noqa: E402

SIM = str(REPO / "sim" / "sim")


def _plan() -> plan.DeploymentPlan:
    raw = yaml.safe_load(STACK_FILE.read_text())["config"]
    values = {k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("spark-llm:")}
    values["engine"] = dict(values["engine"], kind="vllm", version="0.16.0")
    return plan.build_plan(groups(config.parse(values))[0], plan.LAUNCH_TEMPLATE.read_text())


def _ms(samples: list[float]) -> dict:
    ms = [s * 1000 for s in samples]
    return {"samples_ms": [round(s, 1) for s in ms], "median_ms": round(statistics.median(ms), 1)}


def main() -> int:
    args = bench_parser(__doc__, repeat=10).parse_args()
    sim_up(args.workers)
    p = _plan()
    env = dict(os.environ)
    for node in p.nodes:
        sh([SIM, "memory", node.name, "--total-gib", "121", "--free-gib", "10", "--cached-gib", "100"], env)
        sh([SIM, "gpu-process", node.name, "--mib", "20480"], env)
    results: dict[str, dict] = {}
    try:
        for node in p.nodes:
            spec = memory.admission_spec(p, node)
            script = memory.probe_command(p.model_path)
            run_script(node.ssh, "true\n", timeout=60)  # the master connection, as the program's probe leaves it
            probe, verdict, step = [], [], []
            said = ""
            for _ in range(args.repeat):
                start = time.perf_counter()
                run_script(node.ssh, script, timeout=60)
                probe.append(time.perf_counter() - start)

                start = time.perf_counter()
                out = run_script(node.ssh, script, timeout=60)
                said = memory.judge_spec(spec, parse_probe(node.name, out).facts).line()
                verdict.append(time.perf_counter() - start)

                start = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-m", "spark_llm.ops.admission"],
                    input=memory.spec_text(spec),
                    capture_output=True,
                    text=True,
                    cwd=REPO,
                    env=env,
                )
                step.append(time.perf_counter() - start)
                assert done.returncode == 1 and "refused" in done.stderr, done.stderr
            results[node.name] = {
                "probe": _ms(probe),
                "probe_and_verdict": _ms(verdict),
                "admission_step": _ms(step),
                "verdict": said,
            }
    finally:
        for node in p.nodes:
            sh([SIM, "gpu-process", node.name, "off"], env, check=False)
            sh([SIM, "memory", node.name, "off"], env, check=False)
    out = write_result(
        "admission",
        {"repeat": args.repeat, "workers": args.workers, "nodes": results},
    )
    print(f"{'node':<10} {'probe ms':>10} {'+verdict ms':>12} {'step ms':>10}")
    for name, r in results.items():
        print(
            f"{name:<10} {r['probe']['median_ms']:>10} {r['probe_and_verdict']['median_ms']:>12}"
            f" {r['admission_step']['median_ms']:>10}"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
