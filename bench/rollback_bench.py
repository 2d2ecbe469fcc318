#!/usr/bin/env python3
"""Seconds from a failed start to the revision that served before serving again, on the simulated cluster: with
spark-llm:rollout.onFailure `rollback` (the failed `up` starts the rollback itself) and with the command the error
prints (run as soon as `up` ends, as an operator who pastes it at once), side by side in one run, written as JSON.

Usage:   . tools/env.sh && python bench/rollback_bench.py [--repeat N] [--workers N]
Outputs: bench/results/rollback-<UTC timestamp>.json and a short table on stdout.

Each sample: a good revision serves; a relaunch with `--mem-fraction-static 0.97` runs out of memory at the KV cache
(the stand-in, as SGLang does: taken at parse time, fatal at load) past the startup grace, so the readiness gate
sees it and records the failure in the head's history (its time, on this machine's clock); the sample ends at the
first completion this machine gets from the endpoint. A third way: the relaunch also changed the weights (one file
changed, one added, in a source dir on the head: kind head), so the printed command puts back the version every
node kept (issue 31, 1); the sample checks that every node serves the good revision's manifest digest again. The
ways alternate, so machine noise hits them alike.
Talks only to the sim's containers. Absolute numbers depend on the machine; compare within one file.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml
from simbench import REPO, STACK_FILE, bench_parser, bench_stack, serves, sh, sim_up, summary, timed, write_result

HISTORY = "/root/spark-llm/history/starts.jsonl"
WAIT_S = 300.0
# Past the startup grace (1 s), so the gate, not a container's watch step, sees the failure.
KNOBS = {"startupGraceSeconds": 1, "phase_seconds": "weights=2"}


SOURCE, SERVED = "/srv/models/bench-rollback-source", "/srv/models/bench-rollback"
MAKE_SOURCE = (
    f"rm -rf {SOURCE} {SERVED} && mkdir -p {SOURCE} && cd {SOURCE}"
    " && for i in 1 2 3; do head -c 4M /dev/urandom > model-0000$i.safetensors; done"
    """ && echo '{"model_type": "standin"}' > config.json"""
)
# One file changed, one added (`head -c` of urandom each).
CHANGE_SOURCE = f"cd {SOURCE} && " + " && ".join(f"head -c 4M /dev/urandom > model-0000{i}.safetensors" for i in (1, 9))


def write_config(config: Path, fraction: str | None, on_failure: str = "stop", head_weights: bool = False) -> None:
    document = yaml.safe_load(STACK_FILE.read_text())
    document.update({k: v for k, v in (yaml.safe_load(config.read_text()) or {}).items() if k != "config"})
    settings = document["config"]
    settings["spark-llm:timeouts"] = {"startupGraceSeconds": KNOBS["startupGraceSeconds"]}
    engine = settings["spark-llm:engine"]
    engine.setdefault("env", {})["STANDIN_PHASE_SECONDS"] = KNOBS["phase_seconds"]
    if fraction is not None:
        engine["flags"] = ["--mem-fraction-static", fraction]
    settings["spark-llm:rollout"] = {"onFailure": on_failure}
    if head_weights:
        settings["spark-llm:model"] = {
            **settings["spark-llm:model"],
            "path": SERVED,
            "source": {"kind": "head", "path": SOURCE},
        }
    config.write_text(yaml.safe_dump(document, sort_keys=False))


def first_completion(outputs: dict) -> float:
    """Epoch seconds of the first completion the endpoint answers."""
    deadline = time.monotonic() + WAIT_S
    while not serves(outputs, timeout=2):
        if time.monotonic() > deadline:
            sys.exit(f"the endpoint did not serve again within {WAIT_S:.0f} s")
        time.sleep(0.2)
    return time.time()


def failed_at(head_container: str) -> float:
    """When the gate recorded the latest failed start (the head's history; the gate runs on this machine)."""
    text = sh(["docker", "exec", head_container, "tail", "-n", "20", HISTORY], dict(os.environ)).stdout
    for line in reversed(text.splitlines()):
        entry = json.loads(line)
        if entry.get("failed"):
            return datetime.fromisoformat(entry["at"]).timestamp()
    sys.exit("no failed start in the head's history")


def main() -> int:
    ap = bench_parser(__doc__, repeat=2)
    args = ap.parse_args()
    sim_up(args.workers)
    prefix = json.loads((REPO / ".sim" / "state.json").read_text())["prefix"]
    head = f"{prefix}-head"

    samples: dict[str, list[float]] = {"auto": [], "printed_command": [], "weights_changed": []}
    up_fails_s: list[float] = []
    with bench_stack() as (env, stack, config):
        up = ["pulumi", "up", "--yes", "--skip-preview", *stack]
        try:
            for _ in range(args.repeat):
                for mode in samples:
                    head_weights = mode == "weights_changed"
                    if head_weights:
                        sh(["docker", "exec", head, "bash", "-c", MAKE_SOURCE], dict(os.environ))
                    write_config(config, None, head_weights=head_weights)
                    sh(up, env)
                    outputs = json.loads(sh(["pulumi", "stack", "output", "--json", *stack[:2]], env).stdout)
                    if head_weights:
                        sh(["docker", "exec", head, "bash", "-c", CHANGE_SOURCE], dict(os.environ))
                    write_config(config, "0.97", "rollback" if mode == "auto" else "stop", head_weights=head_weights)
                    seconds, failed = timed(up, env, check=False)
                    text = (failed.stdout + failed.stderr).replace("\n    ", " ")
                    if failed.returncode == 0 or "CUDA out of memory" not in text:
                        sys.exit("the relaunch did not fail at the KV cache:\n" + text[-3000:])
                    up_fails_s.append(seconds)
                    log = None
                    if mode == "auto":
                        log = Path(re.search(r"Its log: (\S+\.log)", text).group(1))  # type: ignore[union-attr]
                    else:
                        printed = re.search(r"(spark-llm rollback --stack \S+(?: --config-file \S+)?)", text)
                        if printed is None:
                            sys.exit("the error printed no rollback command:\n" + text[-3000:])
                        command = shlex.split(printed.group(1))
                        sh([sys.executable, "-m", "spark_llm.ops.cli", *command[1:]], env)
                    back = first_completion(outputs)
                    samples[mode].append(back - failed_at(head))
                    if head_weights:  # on its own bytes: the good revision's manifest digest, on every node
                        now = json.loads(sh(["pulumi", "stack", "output", "--json", *stack[:2]], env).stdout)
                        manifest = f"{SERVED}/.spark-llm-manifest.json"
                        for node in [head, *(f"{prefix}-worker-{i}" for i in range(1, args.workers + 1))]:
                            read = sh(["docker", "exec", node, "cat", manifest], dict(os.environ)).stdout
                            if json.loads(read)["digest"] != outputs["weights_manifest_digest"]:
                                sys.exit(f"{node} does not serve the good revision's weights after the rollback")
                        if now["weights_manifest_digest"] != outputs["weights_manifest_digest"]:
                            sys.exit("the stack's weights digest is not the good revision's after the rollback")
                    if log is not None:  # the rollback's own closing lines, before the next sample's `up`
                        deadline = time.monotonic() + WAIT_S
                        while "the deployed revision is a rollback" not in log.read_text():
                            if time.monotonic() > deadline:
                                sys.exit(f"the automatic rollback did not finish: {log}")
                            time.sleep(0.5)
        finally:
            sh(["pulumi", "destroy", "--yes", "--skip-preview", *stack], env, check=False)
            for i in range(args.workers + 1):
                node = head if i == 0 else f"{prefix}-worker-{i}"
                sh(["docker", "exec", node, "rm", "-rf", SOURCE, SERVED], dict(os.environ), check=False)

    result = {
        "workers": args.workers,
        "repeat": args.repeat,
        "knobs": KNOBS,
        "failure_to_first_completion": {
            "auto (rollout.onFailure rollback)": summary(samples["auto"]),
            "printed command (run at once)": summary(samples["printed_command"]),
            "printed command, the relaunch changed the weights": summary(samples["weights_changed"]),
        },
        "failed_up_s": summary(up_fails_s),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    out = write_result("rollback", result)
    for name, row in result["failure_to_first_completion"].items():
        print(f"{name:36s} median {row['median_s']:6.2f} s  {row['samples_s']}")
    print(f"written: {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
