#!/usr/bin/env python3
"""Deployment timings on the simulated cluster, side by side in one run, written as JSON.

Usage:   . tools/env.sh && python bench/deploy_bench.py [--repeat N] [--workers N]
Outputs: bench/results/deploy-<UTC timestamp>.json and a short table on stdout.

Measures, each N times, interleaved so that machine noise hits every method alike:
- `pulumi preview` and a no-op `pulumi up` on a deployed stack (what a re-run costs);
- the rollout of a launch-template edit (scripts recopied, group restarted in order, ready again);
- seconds from a worker that crashes at start (stand-in knob) to `pulumi up` failing with its log.
Talks only to the sim's containers. Absolute numbers depend on the machine; compare within one file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from simbench import REPO, STACK_FILE, bench_parser, bench_stack, sh, sim_up, summary, timed, write_result

TEMPLATE = REPO / "scripts" / "launch.tmpl.sh"


def main() -> int:
    ap = bench_parser(__doc__)
    ap.add_argument(
        "--compare",
        type=Path,
        default=REPO / "bench" / "results" / "deploy-20261202T172329Z.json",
        help="an earlier result file: its medians are written beside this run's, with the ratio",
    )
    args = ap.parse_args()
    # Resolved and checked before anything is measured: a bad path must not cost the run (a relative path used to
    # crash in `relative_to` after every measurement was taken).
    args.compare = args.compare.resolve() if args.compare else None
    if args.compare and not args.compare.is_file():
        ap.error(f"--compare {args.compare}: no such result file")

    sim_up(args.workers)

    with bench_stack() as (env, stack, config):
        up = ["pulumi", "up", "--yes", "--skip-preview", *stack]
        first_up, _ = timed(up, env)

        preview_s, noop_up_s, rollout_s, crash_s = [], [], [], []
        original = TEMPLATE.read_text()
        try:
            for i in range(args.repeat):
                preview_s.append(timed(["pulumi", "preview", *stack], env)[0])
                noop_up_s.append(timed(up, env)[0])

                TEMPLATE.write_text(original + f"# bench edit {i}\n")
                rollout_s.append(timed(up, env)[0])
                TEMPLATE.write_text(original)
                sh(up, env)

                sh(["pulumi", "config", "set", "--path", "engine.env.STANDIN_CRASH_AT_INIT", "1", *stack], env)
                seconds, failed = timed(up, env, check=False)
                if failed.returncode == 0 or "init_torch_distributed" not in failed.stdout + failed.stderr:
                    sys.exit("the crash run did not fail with the worker's log")
                crash_s.append(seconds)
                config.write_text(STACK_FILE.read_text())
                sh(up, env)
        finally:
            TEMPLATE.write_text(original)
            sh(["pulumi", "destroy", "--yes", "--skip-preview", *stack], env, check=False)

    result = {
        "workers": args.workers,
        "repeat": args.repeat,
        "first_up_s": round(first_up, 2),
        "preview": summary(preview_s),
        "noop_up": summary(noop_up_s),
        "script_edit_rollout": summary(rollout_s),
        "worker_crash_to_up_failure": summary(crash_s),
    }
    keys = ("preview", "noop_up", "script_edit_rollout", "worker_crash_to_up_failure")
    if args.compare:
        earlier = json.loads(args.compare.read_text())
        result["compared_with"] = {
            "file": str(args.compare.relative_to(REPO) if args.compare.is_relative_to(REPO) else args.compare),
            **{
                k: {
                    "earlier_median_s": earlier[k]["median_s"],
                    "median_s": result[k]["median_s"],
                    "ratio": round(result[k]["median_s"] / earlier[k]["median_s"], 2),
                }
                for k in keys
                if k in earlier
            },
        }
    out = write_result("deploy", result)
    for key in keys:
        print(f"{key:28s} median {result[key]['median_s']:6.2f} s  {result[key]['samples_s']}")
    for key, row in result.get("compared_with", {}).items():
        if isinstance(row, dict):
            print(f"{key:28s} was {row['earlier_median_s']:6.2f} s  ratio {row['ratio']}")
    print(f"written: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
