#!/usr/bin/env python3
"""Seconds from a wedged engine (running, /health 200, answering nothing) to the group serving again, restarted by
the supervisor (issue 32, 5).

Usage:   . tools/env.sh && python bench/wedge_bench.py [--repeat N] [--workers N] [--wedge-seconds S]
Outputs: bench/results/wedge-<UTC timestamp>.json and a short table on stdout.

Deploys the sim stack with spark-llm:supervisor on (poll 1 s, wedgeSeconds S, a budget large enough for the run)
and the stand-in's wedge knob (STANDIN_WEDGE_WHILE_FILE), then N times: creates the knob's file on the head (rank 0
stops answering, its container and /health stay up) and times, from that moment, (1) the supervisor recording a
restart with cause `wedged` (detection: the bound, its probes and polls), at which moment the file is removed (the
restart is what clears a real wedge), and (2) a one-token completion served again with the supervisor's restart
recorded `served`. Also the supervisor's own seconds from the restart's start to serving. Talks only to the sim's
containers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from simbench import REPO, bench_parser, bench_stack, serves, sh, sim_up, summary, timed, write_result

WEDGE_FILE_ON_NODE = "/root/spark-llm/cache/standin-wedge"
WEDGE_FILE_IN_CONTAINER = "/root/.cache/standin-wedge"  # the engine containers see the node's cache dir as ~/.cache
DEADLINE_S = 300


def head_container() -> str:
    return f"{json.loads((REPO / '.sim' / 'state.json').read_text())['prefix']}-head"


def on_head(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", head_container(), *cmd], capture_output=True, text=True, check=False)


def supervisor_restarts() -> list[dict]:
    """The restarts the supervisor recorded in its state file on the head ([] while it has none)."""
    try:
        return json.loads(on_head("cat", "/root/spark-llm/supervisor-state/state.json").stdout)["restarts"]
    except (ValueError, KeyError):
        return []


def wait(what: str, condition, deadline: float) -> None:
    while not condition():
        if time.monotonic() > deadline:
            on_head("rm", "-f", WEDGE_FILE_ON_NODE)
            sys.exit(f"gave up waiting for {what} after {DEADLINE_S} s")
        time.sleep(0.2)  # the poll interval inside the deadline


def wedge_once(outputs: dict) -> tuple[float, float, float | None]:
    """(seconds to the supervisor's wedged restart, seconds to serving again, the supervisor's restart to serving)."""
    known = len(supervisor_restarts())
    start = time.perf_counter()
    deadline = time.monotonic() + DEADLINE_S
    on_head("touch", WEDGE_FILE_ON_NODE)

    def restarting() -> bool:
        new = supervisor_restarts()[known:]
        return bool(new) and new[-1].get("cause") == "wedged"

    wait("the supervisor to restart the wedged group", restarting, deadline)
    detected = time.perf_counter() - start
    on_head("rm", "-f", WEDGE_FILE_ON_NODE)

    def served() -> bool:
        new = supervisor_restarts()[known:]
        return bool(new) and new[-1].get("result") == "served" and serves(outputs)

    wait("the group to serve again", served, deadline)
    serving = time.perf_counter() - start
    return detected, serving, supervisor_restarts()[-1].get("seconds_to_serving")


def main() -> int:
    ap = bench_parser(__doc__)
    ap.add_argument("--wedge-seconds", type=int, default=10, help="spark-llm:supervisor.wedgeSeconds (10)")
    args = ap.parse_args()
    sim_up(args.workers)
    with bench_stack() as (env, stack, _config):
        settings = {
            "supervisor.enabled": "true",
            "supervisor.pollSeconds": "1",
            "supervisor.maxRestarts": "100",
            "supervisor.backoffSeconds": "0",
            "supervisor.wedgeSeconds": str(args.wedge_seconds),
            "engine.env.STANDIN_WEDGE_WHILE_FILE": WEDGE_FILE_IN_CONTAINER,
        }
        for key, value in settings.items():
            sh(["pulumi", "config", "set", "--path", key, value, *stack], env)
        first_up, _ = timed(["pulumi", "up", "--yes", "--skip-preview", *stack], env)
        outputs = json.loads(sh(["pulumi", "stack", "output", "--json", *stack[:2]], env).stdout)
        detected, serving, recorded = [], [], []
        try:
            for _ in range(args.repeat):
                d, s, r = wedge_once(outputs)
                detected.append(d)
                serving.append(s)
                if r is not None:
                    recorded.append(r)
            no_changes = sh(["pulumi", "preview", "--expect-no-changes", *stack], env, check=False).returncode == 0
        finally:
            on_head("rm", "-f", WEDGE_FILE_ON_NODE)
            sh(["pulumi", "destroy", "--yes", "--skip-preview", *stack], env, check=False)
    result = {
        "workers": args.workers,
        "repeat": args.repeat,
        "wedge_seconds": args.wedge_seconds,
        "poll_seconds": 1,
        "first_up_s": round(first_up, 2),
        "group_start_at_up_s": outputs.get("start_timeline", {}).get("gate_seconds"),
        "wedge_to_restart": summary(detected),
        "wedge_to_serving": summary(serving),
        "supervisor_restart_to_serving": summary(recorded) if recorded else None,
        "preview_no_changes_after": no_changes,
    }
    out = write_result("wedge", result)
    for key in ("wedge_to_restart", "wedge_to_serving"):
        print(f"{key:18s} median {result[key]['median_s']:6.2f} s  {result[key]['samples_s']}")
    print(f"written: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
