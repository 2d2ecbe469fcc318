#!/usr/bin/env python3
"""Seconds from a node's reboot to the group serving again, restarted by the supervisor (nobody runs a command).

Usage:   . tools/env.sh && python bench/reboot_bench.py [--repeat N] [--workers N]
Outputs: bench/results/reboot-<UTC timestamp>.json and a short table on stdout.

Deploys the sim stack with spark-llm:supervisor on (poll 1 s, a budget large enough for the run), then, N times
each, interleaved: `docker restart` of the worker's node container, then of the head's (engines exited, disks and
the supervisor's restart policy kept), each timed until both engines started anew (workers before the head) and
a one-token completion is served. Also the group's own start as the readiness gate measured it at `up`, and what
the supervisor recorded (its seconds from starting the restart to /health). Talks only to the sim's containers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from simbench import REPO, bench_parser, bench_stack, serves, sh, sim_up, summary, timed, write_result

ENGINE = "spark-llm-engine"
DEADLINE_S = 300


def node_container(node: str) -> str:
    prefix = json.loads((REPO / ".sim" / "state.json").read_text())["prefix"]
    return f"{prefix}-{node}"


def started_at(node: str) -> str:
    cmd = ["docker", "exec", node_container(node), "docker", "inspect", "-f", "{{.State.StartedAt}}", ENGINE]
    return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()


def supervisor_restarts() -> list[dict]:
    """The restarts the supervisor recorded in its state file on the head ([] while it has none)."""
    cmd = ["docker", "exec", node_container("head"), "cat", "/root/spark-llm/supervisor-state/state.json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    try:
        return json.loads(out)["restarts"]
    except (ValueError, KeyError):
        return []


def reboot(node: str, nodes: list[str], outputs: dict) -> float:
    """Seconds from the node's reboot to a served completion; returns once the supervisor recorded its restart as
    done (the next reboot must not cut its bookkeeping short)."""
    before = {n: started_at(n) for n in nodes}
    done = len([r for r in supervisor_restarts() if r.get("result") != "in progress"])
    start = time.perf_counter()
    subprocess.run(["docker", "restart", "-t", "2", node_container(node)], check=True, capture_output=True)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        now = {n: started_at(n) for n in nodes}
        anew = all(now[n] > before[n] for n in nodes) and all(now[n] < now["head"] for n in nodes if n != "head")
        if anew and serves(outputs):
            seconds = time.perf_counter() - start
            while len([r for r in supervisor_restarts() if r.get("result") != "in progress"]) <= done:
                if time.monotonic() > deadline:
                    sys.exit(f"the supervisor did not record its restart after {node}'s reboot")
                time.sleep(0.5)  # the poll interval inside the deadline
            return seconds
        time.sleep(0.5)  # the poll interval inside the deadline
    sys.exit(f"the group did not serve again within {DEADLINE_S} s of {node}'s reboot")


def main() -> int:
    ap = bench_parser(__doc__)
    args = ap.parse_args()
    sim_up(args.workers)
    nodes = ["head", *(f"worker-{i}" for i in range(1, args.workers + 1))]
    with bench_stack() as (env, stack, config):
        for key, value in (("enabled", "true"), ("pollSeconds", "1"), ("maxRestarts", "100"), ("backoffSeconds", "0")):
            sh(["pulumi", "config", "set", "--path", f"supervisor.{key}", value, *stack], env)
        first_up, _ = timed(["pulumi", "up", "--yes", "--skip-preview", *stack], env)
        outputs = json.loads(sh(["pulumi", "stack", "output", "--json", *stack[:2]], env).stdout)
        worker_s, head_s = [], []
        try:
            for _ in range(args.repeat):
                worker_s.append(reboot("worker-1", nodes, outputs))
                head_s.append(reboot("head", nodes, outputs))
            recorded = [r["seconds_to_serving"] for r in supervisor_restarts() if r.get("seconds_to_serving")]
            no_changes = sh(["pulumi", "preview", "--expect-no-changes", *stack], env, check=False).returncode == 0
        finally:
            sh(["pulumi", "destroy", "--yes", "--skip-preview", *stack], env, check=False)
    result = {
        "workers": args.workers,
        "repeat": args.repeat,
        "first_up_s": round(first_up, 2),
        "group_start_at_up_s": outputs.get("start_timeline", {}).get("gate_seconds"),
        "worker_reboot_to_serving": summary(worker_s),
        "head_reboot_to_serving": summary(head_s),
        "supervisor_restart_to_health": summary(recorded) if recorded else None,
        "preview_no_changes_after": no_changes,
    }
    out = write_result("reboot", result)
    for key in ("worker_reboot_to_serving", "head_reboot_to_serving"):
        print(f"{key:26s} median {result[key]['median_s']:6.2f} s  {result[key]['samples_s']}")
    print(f"written: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
