#!/usr/bin/env python3
"""The three engine profiles side by side on the simulated cluster, written as JSON.

Usage:   . tools/env.sh && python bench/profiles_bench.py [--repeat N] [--workers N]
Outputs: bench/results/profiles-<UTC timestamp>.json and a short table on stdout.

For each profile (sglang, vllm native, vllm on Ray), interleaved round by round so machine noise hits each alike:
- switch_up_s: `pulumi up` that switches the deployed group to this profile (old group stopped in order, the new
  one started workers first, until rank 0 generates a token);
- ready_after_s: of that, the seconds from the head's start to its first token (the readiness gate's own number);
- crash_to_failure_s: `pulumi up` with a worker crashing at init (stand-in knob) until it fails with that
  worker's log lines.
The stand-in engine loads no model: these are the program's and the group formation's costs, not an engine's.
Talks only to the sim's containers.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

from simbench import REPO, STACK_FILE, bench_parser, file_backend_url, sh, sim_up, summary, timed, write_result

PROFILES = {"sglang": ("sglang", "native"), "vllm-native": ("vllm", "native"), "vllm-ray": ("vllm", "ray")}
READY = re.compile(r"ready: rank 0 generated a token after ([0-9.]+) s")


def main() -> int:
    ap = bench_parser(__doc__)
    args = ap.parse_args()
    sim_up(args.workers)

    samples: dict[str, dict[str, list[float]]] = {
        p: {"switch_up_s": [], "ready_after_s": [], "crash_to_failure_s": []} for p in PROFILES
    }
    with tempfile.TemporaryDirectory(prefix="spark-llm-bench-") as tmp:
        env = dict(os.environ, PULUMI_BACKEND_URL=file_backend_url(tmp))
        sh(["pulumi", "stack", "init", "sim", "--non-interactive"], env)
        config = Path(tmp) / "Pulumi.sim.yaml"
        stack = ["--stack", "sim", "--non-interactive", "--config-file", str(config)]
        up = ["pulumi", "up", "--yes", "--skip-preview", *stack]

        def use(profile: str, crash: bool = False) -> None:
            config.write_text(STACK_FILE.read_text())
            kind, executor = PROFILES[profile]
            for path, value in (("engine.kind", kind), ("engine.executor", executor)):
                sh(["pulumi", "config", "set", "--path", path, value, *stack], env)
            if crash:
                sh(["pulumi", "config", "set", "--path", "engine.env.STANDIN_CRASH_AT_INIT", "1", *stack], env)

        # Start from the last profile, so that every timed `up` below is a real switch.
        use(list(PROFILES)[-1])
        sh(up, env)
        try:
            for _ in range(args.repeat):
                for profile in PROFILES:
                    use(profile)
                    seconds, result = timed(up, env)
                    ready = READY.search(result.stdout + result.stderr)
                    if not ready:
                        sys.exit(f"{profile}: no readiness line in the up output")
                    samples[profile]["switch_up_s"].append(seconds)
                    samples[profile]["ready_after_s"].append(float(ready.group(1)))

                    use(profile, crash=True)
                    seconds, failed = timed(up, env, check=False)
                    if failed.returncode == 0 or "STANDIN_CRASH_AT_INIT selects node rank 1" not in failed.stdout:
                        sys.exit(f"{profile}: the crash run did not fail with the worker's log")
                    samples[profile]["crash_to_failure_s"].append(seconds)
        finally:
            sh(["pulumi", "destroy", "--yes", "--skip-preview", *stack], env, check=False)

    result = {
        "workers": args.workers,
        "repeat": args.repeat,
        "profiles": {p: {k: summary(v) for k, v in by_metric.items()} for p, by_metric in samples.items()},
    }
    out = write_result("profiles", result)
    for profile, metrics in result["profiles"].items():
        cells = "  ".join(f"{k} {v['median_s']:6.2f}" for k, v in metrics.items())
        print(f"{profile:12s} medians: {cells}")
    print(f"written: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
