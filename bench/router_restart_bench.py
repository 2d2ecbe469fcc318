#!/usr/bin/env python3
"""Seconds from an engine answering again (after a restart) to the router serving its model again, and what a client
asking that model meanwhile is told, with smg's own health settings, with a deployment's health settings alone, and
with a deployment's (spark_llm.plan.router.HEALTH_FLAGS and RETRY_FLAGS), as JSON.

Usage:   . tools/env.sh && python bench/router_restart_bench.py [--repeat N] [--down-seconds S]
Outputs: bench/results/router-restart-<UTC timestamp>.json and a line per round on stdout.

On this machine's docker (bench/router_rig.py: stand-in engines and the router in front, removed at the end). Each
round: a client asks `alpha` through the router every 100 ms; alpha's engine container is stopped, kept down for
S seconds, and started again; the round ends at the router's first 200 for alpha after the engine's own /health
answered (polled every 50 ms, straight to the engine). Each answer meanwhile is counted by its status and smg's
error code, and a request for a model the router never had is asked once, for comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.router_rig import RouterRig, docker, healthy, request, router_rig  # noqa: E402
from bench.simbench import write_result  # noqa: E402
from spark_llm.plan.router import HEALTH_FLAGS, RETRY_FLAGS  # noqa: E402

GIVE_UP_S = 120


def asked(rig: RouterRig, model: str) -> str:
    """A one-token completion through the router: `200`, or the status with smg's error code (`503 no_...`)."""
    try:
        status, _, body = request(
            rig.router_url, "POST", "/v1/completions", {"model": model, "prompt": "ping", "max_tokens": 1}, key=rig.key
        )
    except OSError as error:
        return type(error).__name__
    if status == 200:
        return "200"
    return f"{status} {json.loads(body).get('error', {}).get('code', '')}".strip()


def one_round(rig: RouterRig, down_s: float) -> dict:
    engine, url = rig.engine_containers["alpha"], rig.engine_urls["alpha"]
    seen: Counter[str] = Counter()
    docker("stop", "-t", "1", engine)
    stopped = time.monotonic()
    while time.monotonic() - stopped < down_s:
        seen[asked(rig, "alpha")] += 1
        time.sleep(0.1)
    docker("start", engine)
    answered = None
    while True:
        now = time.monotonic()
        if answered is None and healthy(url):
            answered = now
        answer = asked(rig, "alpha")
        seen[answer] += 1
        if answered is not None and answer == "200":
            return {
                "served_again_s_after_engine_answered": round(time.monotonic() - answered, 2),
                "answers_while_not_served": dict(seen),
                "unknown_model": asked(rig, "not-a-model"),
            }
        if now - stopped > GIVE_UP_S:
            return {"served_again_s_after_engine_answered": None, "answers_while_not_served": dict(seen)}
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--down-seconds", type=float, default=5.0)
    args = parser.parse_args()
    settings = {
        "smg's defaults": (),
        "HEALTH_FLAGS alone (before issue 41)": HEALTH_FLAGS,
        "a deployment's (HEALTH_FLAGS, RETRY_FLAGS)": HEALTH_FLAGS + RETRY_FLAGS,
    }
    results = {}
    for label, flags in settings.items():
        with router_rig(models_at_start=("alpha",), router_flags=flags) as rig:
            rounds = [one_round(rig, args.down_seconds) for _ in range(args.repeat)]
        for i, result in enumerate(rounds, 1):
            print(f"{label}, round {i}: served again {result['served_again_s_after_engine_answered']} s after the"
                  f" engine answered; meanwhile {result['answers_while_not_served']}")  # fmt: skip
        results[label] = {"router_flags": list(flags), "rounds": rounds}
    path = write_result("router-restart", {"down_seconds": args.down_seconds, "settings": results})
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
