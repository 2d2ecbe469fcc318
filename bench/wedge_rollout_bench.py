#!/usr/bin/env python3
"""A rollout that wedges after its first answer, with spark-llm:rollout.onFailure `rollback`: seconds from the wedge
to the last good revision serving again (goal, issue 41: within the wedge bound + that revision's start + 30 s), and
the gap a client asking every 0.5 s saw, on the simulated cluster, written as JSON.

Usage:   . tools/env.sh && python bench/wedge_rollout_bench.py [--repeat N] [--workers N] [--wedge-seconds S]
         [--probation P]
Outputs: bench/results/wedge-rollout-<UTC timestamp>.json and a short table on stdout.

Each sample: a good revision serves; a relaunch sets the stand-in's STANDIN_WEDGE_AFTER_ANSWERS=1 (its engine
answers one completion, then none, its /health up: a hung scheduler or collective) and supervisor.wedgeSeconds S.
`pulumi up` fails the start as wedged (the readiness gate holds it to S), and the rollback it starts by itself brings
the good revision back. A client asks the endpoint for a one-token completion every 0.5 s from before the `up` until
the good revision has served for 5 s. The wedge's start is when the gate's wedge watch first went unanswered (the
`since` its failure names, this machine's clock); the good revision's start is its rollback's own start as the gate
timed it (the head's history). With --probation P the relaunch wedges a moment later instead, after its first answer
and the canary (STANDIN_WEDGE_AFTER_ANSWERS=2), and sets spark-llm:rollout.probationSeconds P: the gate's probation
catches it. Talks only to the sim's containers.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path

import yaml
from rollback_bench import HISTORY, WAIT_S
from simbench import REPO, STACK_FILE, bench_parser, bench_stack, serves, sh, sim_up, summary, timed, write_result
from steady_client import SteadyClient

INTERVAL_S = 0.5
SETTLE_S = 5.0
SLACK_S = 30.0


def write_config(config: Path, wedge_seconds: int, wedging: bool, probation: int = 0) -> None:
    document = yaml.safe_load(STACK_FILE.read_text())
    document.update({k: v for k, v in (yaml.safe_load(config.read_text()) or {}).items() if k != "config"})
    settings = document["config"]
    settings["spark-llm:rollout"] = {"onFailure": "rollback"}
    settings["spark-llm:supervisor"] = {**settings.get("spark-llm:supervisor", {}), "wedgeSeconds": wedge_seconds}
    if wedging:
        # On probation: the first answer and the canary pass, the wedge comes after (only the relaunch has one: the
        # rollback's `up` of the good revision ends at its first answer).
        answers = "2" if probation else "1"
        settings["spark-llm:engine"].setdefault("env", {})["STANDIN_WEDGE_AFTER_ANSWERS"] = answers
        if probation:
            settings["spark-llm:rollout"]["probationSeconds"] = probation
    config.write_text(yaml.safe_dump(document, sort_keys=False))


# The rollback's log lines that mark its steps (its own words, then its `pulumi up`'s).
ROLLBACK_MARKS = {
    "rollback waits for the up": "waiting for the failed",
    "rollback read the last good update": "is the last good one",
    "rollback read the weights": "no weights copied",
    "rollback began its up": "Updating (sim)",
    "rollback restarted the head": "spark-engine-head created",
}


def rollback_start_seconds(head_container: str, revision: str) -> float:
    """The rollback's own start of `revision`, as its record has it: the longest node's phases (its engine's start,
    from its container's start to its server) and the gate's wait beyond them."""
    text = sh(["docker", "exec", head_container, "tail", "-n", "20", HISTORY], dict(os.environ)).stdout
    for line in reversed(text.splitlines()):
        entry = json.loads(line)
        if entry.get("revision") == revision and not entry.get("failed") and "gate_seconds" in entry:
            phases = [sum(p["seconds"] for p in node) for node in (entry.get("nodes") or {}).values()]
            return round(max(phases, default=0.0) + float(entry["gate_seconds"]), 2)
    sys.exit(f"no start of {revision} that served in the head's history")


def gap(client: SteadyClient, after_s: float) -> dict:
    """The failed requests after `after_s` (seconds since the client started) and the longest run of them."""
    answers = [a for a in client.answers if a.at >= after_s]
    longest, run_start = 0.0, None
    for a in answers:
        if a.status != 200 and run_start is None:
            run_start = a.at
        elif a.status == 200 and run_start is not None:
            longest, run_start = max(longest, a.at - run_start), None
    return {
        "requests": len(answers),
        "failed": sum(a.status != 200 for a in answers),
        "longest_gap_s": round(longest, 2),
    }


def main() -> int:
    ap = bench_parser(__doc__, repeat=2)
    ap.add_argument("--wedge-seconds", type=int, default=12)
    ap.add_argument("--probation", type=int, default=0, help="spark-llm:rollout.probationSeconds of the relaunch")
    args = ap.parse_args()
    sim_up(args.workers)
    head = json.loads((REPO / ".sim" / "state.json").read_text())["prefix"] + "-head"
    rows: list[dict] = []
    with bench_stack() as (env, stack, config):
        up = ["pulumi", "up", "--yes", "--skip-preview", *stack]
        try:
            for _ in range(args.repeat):
                write_config(config, args.wedge_seconds, wedging=False)
                sh(up, env)
                outputs = json.loads(sh(["pulumi", "stack", "output", "--json", *stack[:2]], env).stdout)
                good = outputs["group_revision"]
                write_config(config, args.wedge_seconds, wedging=True, probation=args.probation)
                with SteadyClient(outputs["endpoint"], outputs["model"], interval_s=INTERVAL_S) as client:
                    began = time.time()
                    seconds, failed = timed(up, env, check=False)
                    text = re.sub(r"\s+", " ", failed.stdout + failed.stderr)  # Pulumi wraps its diagnostics
                    up_ended = time.time()
                    # The last such line: a failure recorded before (an earlier sample's) shows in the output too.
                    found = re.findall(
                        r"the start is wedged: rank 0 has answered no .*? since (\S+) \(\d+ probes", text
                    )
                    wedged = found[-1] if found else None
                    log = re.search(r"Its log: (\S+\.log)", text)
                    if failed.returncode == 0 or wedged is None or log is None:
                        sys.exit("the relaunch did not fail as wedged with a rollback started:\n" + text[-3000:])
                    deadline = time.monotonic() + WAIT_S
                    marks: dict[str, float] = {}
                    while "the deployed revision is a rollback" not in (said := Path(log.group(1)).read_text()):
                        if time.monotonic() > deadline:
                            sys.exit(f"the automatic rollback did not finish: {log.group(1)}")
                        for mark, line in ROLLBACK_MARKS.items():
                            if mark not in marks and line in said:
                                marks[mark] = time.time()
                        time.sleep(0.1)
                    while not serves(outputs, timeout=2):
                        if time.monotonic() > deadline:
                            sys.exit("the good revision did not serve again")
                        time.sleep(0.2)
                    back = time.time()
                    time.sleep(SETTLE_S)  # the client's view after the good revision is back (its 200s)
                since = datetime.fromisoformat(wedged).timestamp()
                start_s = rollback_start_seconds(head, good)
                wedge_to_serving = back - since
                # Where the seconds went, from the wedge's start (the gate's first unanswered probe).
                steps = {"up failed": up_ended, **marks, "serving": back}
                phases = {name: round(at - since, 2) for name, at in steps.items()}
                rows.append(
                    {
                        "failed_up_s": round(seconds, 2),
                        "wedge_to_serving_s": round(wedge_to_serving, 2),
                        "goal_s": round(args.wedge_seconds + start_s + SLACK_S, 2),
                        "good_start_s": start_s,
                        "within_goal": wedge_to_serving <= args.wedge_seconds + start_s + SLACK_S,
                        "client": gap(client, 0.0),
                        "client_from_wedge": gap(client, since - began),
                        "seconds_after_the_wedge": phases,
                    }
                )
        finally:
            sh(["pulumi", "destroy", "--yes", "--skip-preview", *stack], env, check=False)
    result = {
        "workers": args.workers,
        "repeat": args.repeat,
        "wedge_seconds": args.wedge_seconds,
        "probation_seconds": args.probation,
        "client_interval_s": INTERVAL_S,
        "wedge_to_serving": summary([r["wedge_to_serving_s"] for r in rows]),
        "samples": rows,
    }
    out = write_result("wedge-rollout", result)
    for r in rows:
        print(
            f"wedge -> serving {r['wedge_to_serving_s']:6.2f} s (goal {r['goal_s']:.1f} s)  client: "
            f"{r['client']['failed']} of {r['client']['requests']} failed, longest gap {r['client']['longest_gap_s']} s"
        )
    print(f"written: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
