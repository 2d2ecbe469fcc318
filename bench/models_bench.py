#!/usr/bin/env python3
"""Requests that fail to model B while model A rolls out (goal: 0), on the simulated cluster with two models, written
as JSON with B's latency during each rollout beside a quiet window of the same length; with --churn, also the
requests that fail to the models that stay while models come and go (goal: 0), and whether the router kept its
container.

Usage:   . tools/env.sh && python bench/models_bench.py [--repeat N] [--churn]
Outputs: bench/results/models-<UTC timestamp>.json and a short table on stdout.

The stack: the sim's stand-in model across head and worker (B) and a small stand-in model on the head (A)
(bench/steady_client.two_models). Each round changes A's --mem-fraction-static (0.2 and 0.25 in turn), so `pulumi
up` restarts A's group alone; a client asks B for a one-token completion every 100 ms from just before `up` starts
until it ends, at the stack's endpoint: the router (`sim up --load-router`), with the stack's API key. Then the same
client runs as long again with nothing rolling out: the quiet window.

--churn, after the rounds: four `pulumi up`s, each changing the list of models (a third model added, the first
renamed, the third renamed, the third removed), with a client asking each model that stays every 100 ms during the
`up`; the router's container ID and start time before and after each.

--reboot, last: a reboot of the head (`docker restart` of its node container: engines exited, disks and restart
policies kept) with the stack's default settings (the supervisor is on by default, one for the stack), timed from the
node being back to each model answering a one-token completion through the router again, beside each model's start
as the supervisor timed its restart (issue 40: the big model within its start + 10 s). One a run: a second reboot
within the supervisor's window waits its backoff, by design. Talks only to the sim's containers.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
import sys
import time
from contextlib import ExitStack

import yaml
from simbench import REPO, bench_parser, bench_stack, sh, sim_up, write_result
from steady_client import SMALL, THIRD, SteadyClient, third_model, two_models

BIG = "spark-llm/standin-model"
RENAMED = "spark-llm/standin-model-renamed"
THIRD_RENAMED = "spark-llm/standin-third-renamed"
REBOOT_DEADLINE_S = 300
SSH_CONFIG = REPO / ".sim" / "ssh_config"


def router_container(env: dict) -> str:
    """The router container's ID and start time on the head (a replaced or restarted router changes it)."""
    inspect = ["docker", "inspect", "-f", "{{.Id}} {{.State.StartedAt}}", "spark-llm-router"]
    return sh(["ssh", "-F", str(SSH_CONFIG), "head", shlex.join(inspect)], env).stdout.strip()  # one remote line


def rename_first(config: dict) -> None:
    config["spark-llm:models"][0]["name"] = RENAMED


def rename_third(config: dict) -> None:
    config["spark-llm:models"][2]["name"] = THIRD_RENAMED


def remove_third(config: dict) -> None:
    config["spark-llm:models"] = config["spark-llm:models"][:2]


# (what changes, how the stack file changes, the models that stay and are asked meanwhile)
CHURN = (
    ("a third model added", third_model, (BIG, SMALL)),
    ("the first model renamed", rename_first, (SMALL, THIRD)),
    ("the third model renamed", rename_third, (RENAMED, SMALL)),
    ("the third model removed", remove_third, (RENAMED, SMALL)),
)


def churn(config_file, url: str, key: str, env: dict, stack_args: list[str]) -> list[dict]:
    """CHURN's `up`s in turn, each with a client on each model that stays: what each saw, and whether the router
    kept its container."""
    out = []
    for what, change, staying in CHURN:
        document = yaml.safe_load(config_file.read_text())
        change(document["config"])
        config_file.write_text(yaml.safe_dump(document, sort_keys=False))
        router_before = router_container(env)
        start = time.monotonic()
        with ExitStack() as running:
            clients = [running.enter_context(SteadyClient(url, model, key)) for model in staying]
            sh(["pulumi", "up", "--yes", "--skip-preview", *stack_args], env)
        seconds = time.monotonic() - start
        kept = router_container(env) == router_before
        out.append(
            {
                "change": what,
                "up_seconds": round(seconds, 1),
                "router_container_kept": kept,
                "staying": {client.model: client.summary() for client in clients},
            }
        )
        failed = {client.model: f"{client.summary()['failed']} of {client.summary()['requests']}" for client in clients}
        print(f"{what}: up {seconds:5.1f} s; router kept: {kept}; failed to the models that stay: {failed}")
    return out


def head_reboots(url: str, key: str, env: dict, stack_args: list[str], count: int) -> list[dict]:
    """`count` reboots of the head: per model, seconds from the node back to an answer through the router."""
    models = json.loads(sh(["pulumi", "stack", "output", "--json", *stack_args[:2]], env).stdout)["models"]
    prefix = json.loads((REPO / ".sim" / "state.json").read_text())["prefix"]
    out = []
    for i in range(count):
        sh(["docker", "restart", "-t", "2", f"{prefix}-head"], env)
        back, answered = time.monotonic(), {}
        deadline = back + REBOOT_DEADLINE_S
        while len(answered) < len(models) and time.monotonic() < deadline:
            for name in models:
                if name not in answered and SteadyClient(url, name, key, timeout_s=5).ask() == 200:
                    answered[name] = round(time.monotonic() - back, 1)
            time.sleep(0.25)  # the poll interval inside the deadline
        # Each model's start: the supervisor's restart of it, as it timed it (stop, start in order, serving).
        cli = [a for a in stack_args if a != "--non-interactive"]  # the CLI's own options: --stack, --config-file
        status = sh([sys.executable, "-m", "spark_llm.ops.cli", "status", "--json", *cli], env, check=False)
        report = json.loads(status.stdout)["models"]
        starts = {name: report[name]["supervisor"]["restarts"][-1].get("seconds_to_serving") for name in models}
        within = {
            name: answered.get(name) is not None and answered[name] <= (starts[name] or 0) + 10 for name in models
        }
        out.append({"answered_s": answered, "start_s": starts, "within_start_plus_10_s": within})
        print(f"head reboot {i + 1}: answered through the router after {answered} (starts {starts})")
    return out


def write_config(config_file, small_flags: tuple[str, ...]) -> None:
    document = yaml.safe_load(config_file.read_text())
    if "spark-llm:models" in document["config"]:
        document["config"]["spark-llm:models"][1]["engine"]["flags"] = list(small_flags)
    else:
        two_models(document["config"], small_flags)
    config_file.write_text(yaml.safe_dump(document, sort_keys=False))


def main() -> int:
    parser = bench_parser(__doc__, repeat=3)
    parser.add_argument("--churn", action="store_true", help="then add, rename and remove a model (see above)")
    parser.add_argument("--reboot", action="store_true", help="then a reboot of the head (see above)")
    args = parser.parse_args()
    sim_up(args.workers)
    sh([str(REPO / "sim/sim"), "up", "--load-router"], dict(os.environ))  # the router's image on the head
    rounds = []
    key = f"sk-bench-{secrets.token_hex(12)}"
    with bench_stack() as (env, stack_args, config):
        write_config(config, ("--mem-fraction-static", "0.2"))
        # The key on pulumi's stdin, never on a command line.
        cmd = ["pulumi", "config", "set", "--secret", "apiKey", *stack_args]
        subprocess.run(cmd, input=key, text=True, env=env, cwd=REPO, check=True, capture_output=True)
        sh(["pulumi", "up", "--yes", "--skip-preview", *stack_args], env)
        outputs = json.loads(sh(["pulumi", "stack", "output", "--json", "--show-secrets", *stack_args[:2]], env).stdout)
        url = outputs["endpoint"]  # the router
        for i in range(args.repeat):
            fraction = ("0.25", "0.2")[i % 2]
            write_config(config, ("--mem-fraction-static", fraction))
            start = time.monotonic()
            with SteadyClient(url, BIG, key) as during:
                sh(["pulumi", "up", "--yes", "--skip-preview", *stack_args], env)
            seconds = time.monotonic() - start
            with SteadyClient(url, BIG, key) as quiet:
                time.sleep(seconds)  # the quiet window: as long as the rollout took, with nothing rolling out
            after = json.loads(sh(["pulumi", "stack", "output", "--json", *stack_args[:2]], env).stdout)["models"]
            restarted_b = after[BIG]["container_ids"] != outputs["models"][BIG]["container_ids"]
            rounds.append(
                {
                    "a_flag": f"--mem-fraction-static {fraction}",
                    "up_seconds": round(seconds, 1),
                    "b_restarted": restarted_b,
                    "during_a_rollout": during.summary(),
                    "quiet": quiet.summary(),
                }
            )
            print(
                f"round {i + 1}: up {seconds:5.1f} s; B during A's rollout: {during.summary()['failed']} of"
                f" {during.summary()['requests']} failed, p50 {during.summary()['latency_ms']['p50']} ms;"
                f" quiet: {quiet.summary()['failed']} of {quiet.summary()['requests']} failed,"
                f" p50 {quiet.summary()['latency_ms']['p50']} ms"
            )
        churned = churn(config, url, key, env, stack_args) if args.churn else []
        reboots = head_reboots(url, key, env, stack_args, 1 if args.reboot else 0)
        sh(["pulumi", "destroy", "--yes", "--skip-preview", *stack_args], env, check=False)
    failed = sum(r["during_a_rollout"]["failed"] for r in rounds)
    failed_churn = sum(s["failed"] for c in churned for s in c["staying"].values())
    replaced = [c["change"] for c in churned if not c["router_container_kept"]]
    path = write_result(
        "models",
        {"endpoint": "router", "model_a": SMALL, "model_b": BIG,
         "failed_to_b_during_a_rollouts": failed, "rounds": rounds,
         **({"failed_to_staying_models_during_churn": failed_churn, "router_replaced_by": replaced,
             "churn": churned} if args.churn else {}),
         **({"head_reboots": reboots} if args.reboot else {})},
    )  # fmt: skip
    print(f"requests failed to B during A's rollouts: {failed}; {path}")
    if args.churn:
        print(f"requests failed to the models that stay while models come and go: {failed_churn}")
    late = [r for r in reboots if not r["within_start_plus_10_s"].get(BIG)]
    return 0 if failed == 0 and failed_churn == 0 and not replaced and not late else 1


if __name__ == "__main__":
    sys.exit(main())
