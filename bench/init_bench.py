#!/usr/bin/env python3
"""Seconds `spark-llm init` takes on the simulated cluster, with 2 and 4 nodes: the workers found among the head's
fabric neighbours (a ping sweep of the fabric subnet, then an ssh-keyscan of each from the head) against the workers
named with --worker, side by side, as JSON. Target: under 10 s for 2 nodes.

Usage:   . tools/env.sh && python bench/init_bench.py [--repeat N]
Outputs: bench/results/init-<UTC timestamp>.json and a short table on stdout.

Each run is a whole `spark-llm init --dry-run` (a Python start, every host key scanned twice: at the start and just
before writing, each node's discovery over ssh, the head's pings of the workers' fabric addresses); --dry-run so that
no stack is made (writing the file is a few milliseconds; `pulumi stack init` is Pulumi's). The nodes show RoCE
(`sim roce on`). The two methods alternate, so machine noise hits them alike. Talks only to the sim's containers.
Absolute numbers depend on the machine; compare within one file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402

from bench.simbench import REPO, STACK_FILE, bench_parser, sh, sim_up, summary, timed, write_result  # noqa: E402
from spark_llm.remote.ssh import fingerprint  # noqa: E402

SIM = str(REPO / "sim" / "sim")
NODE_COUNTS = (2, 4)


def init_command(nodes: list[dict], key: str, named: bool) -> list[str]:
    head = next(n for n in nodes if n["role"] == "head")
    cmd = [sys.executable, "-m", "spark_llm.ops.cli", "init", "--stack", "bench", "--head", f"root@{head['host']}"]
    cmd += ["--key", key, "--config-from", "sim/stack-defaults.yaml", "--dry-run"]
    # The keys the sim recorded as it made the nodes: what a person reads on each node's console.
    for node in nodes:
        cmd += ["--accept", fingerprint(node["hostKey"])]
    if named:
        for node in nodes:
            if node["role"] == "worker":
                cmd += ["--worker", node["host"]]
    return cmd


def main() -> int:
    args = bench_parser(__doc__, repeat=5).parse_args()
    env = dict(os.environ)
    results: dict[str, dict] = {}
    for count in NODE_COUNTS:
        sim_up(count - 1)
        sh([SIM, "roce", "on"], env)
        config = yaml.safe_load(STACK_FILE.read_text())["config"]
        nodes, key = config["spark-llm:nodes"], config["spark-llm:sshKeyPath"]
        found, named = [], []
        for _ in range(args.repeat):
            for method, samples in ((False, found), (True, named)):
                seconds, result = timed(init_command(nodes, key, method), env)
                assert result.stdout.count("role: worker") == count - 1, result.stderr[-2000:]
                samples.append(seconds)
        results[f"{count} nodes"] = {"workers found": summary(found), "workers named": summary(named)}
    sh([SIM, "roce", "off"], env)
    out = write_result("init", {"repeat": args.repeat, "target_s_2_nodes": 10, "runs": results})
    print(f"{'nodes':<10} {'found (median s)':>18} {'named (median s)':>18}")
    for name, r in results.items():
        print(f"{name:<10} {r['workers found']['median_s']:>18} {r['workers named']['median_s']:>18}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
