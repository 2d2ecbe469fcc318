"""`spark-llm`: the operator's tools for a deployed (or about to be deployed) stack.

    spark-llm preflight     every node ready for `pulumi up`?
    spark-llm status        what runs where, against what the config gives now
    spark-llm top           the cluster as numbers, live (spark-llm:monitoring's Prometheus)
    spark-llm dashboard     the same numbers as a Grafana dashboard, with its provisioning files
    spark-llm logs          every node's engine log, interleaved by time
    spark-llm smoke         one chat completion and a short load through the endpoint
    spark-llm restart       the group restarted in order, through `pulumi up --replace`
    spark-llm exec          one command on one node, over the stack's pinned ssh
    spark-llm rollback      the revision that served before, back (after a failed start)
    spark-llm recipes       the known-good recipes, their fit on 2 and 4 Sparks on paper, and sources
    spark-llm init          a new stack from the head's address: host keys pinned, the cluster discovered

Each command reads the stack's config with the Pulumi CLI (`--stack`, `--config-file` as pulumi takes them)
and builds the same plan as the Pulumi program; `--json` prints one JSON document for scripts.

A stack of several models (spark-llm:models) is one engine group per model: the commands that act on one group
(logs, smoke, restart, rollback) take `--model NAME` and refuse to guess without it; status shows every model (or
the one named), and so does top; preflight and exec are about the nodes, and run once for the stack's nodes.
"""

from __future__ import annotations

import argparse
import faulthandler
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

from spark_llm.config import ConfigError
from spark_llm.ops import dashboard, logs, node_exec, recipes, restart, rollback, smoke, top
from spark_llm.ops.init import command as init
from spark_llm.ops.preflight import command as preflight
from spark_llm.ops.pulumi_cli import PulumiCli, PulumiError
from spark_llm.ops.status import command as status
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.stack import ModelChoiceError, StackPlan
from spark_llm.remote import key_files

COMMANDS: dict[str, tuple[ModuleType, str]] = {
    "preflight": (preflight, "check every node before `pulumi up` (exit 1 on any failure)"),
    "status": (status, "containers, uptime, group revision against the config, the head's health; drift"),
    "top": (top, "the cluster as numbers, live, from the stack's Prometheus: per model, per node, firing alerts"),
    "dashboard": (dashboard, "the stack's Grafana dashboard and provisioning files, from the same panels as top"),
    "logs": (logs, "every node's engine log, prefixed by node and interleaved by timestamp"),
    "smoke": (smoke, "one chat completion and a short concurrent load: time to first token, tokens/s, errors"),
    "restart": (restart, "restart the group in order with `pulumi up --replace` of every worker container"),
    "exec": (node_exec, "run one command on one node (`exec NODE -- CMD...`): the stack's key, pinned host keys"),
    "rollback": (rollback, "the last good revision serves again: `pulumi up` with the last succeeded update's config"),
    "init": (init, "a new stack from the head's address: host keys scanned and pinned, the cluster discovered"),
    "recipes": (recipes, "the known-good recipes in recipes/, with their fit on 2 and 4 Sparks on paper, and sources"),
}


# What a command acts on: one model's engine group (the default), every model (status), or the stack's nodes.
GROUP, MODELS, NODES = "group", "models", "nodes"
SCOPES = {"status": MODELS, "top": MODELS, "preflight": NODES, "exec": NODES, "dashboard": NODES}


def plan_for(command: str, stack: StackPlan, model: str | None) -> DeploymentPlan | StackPlan:
    """What the command's `run` is given: one model's plan, the stack with the models asked, or the whole stack."""
    kind = SCOPES.get(command, GROUP)
    if kind == NODES:
        return stack
    if kind == MODELS:
        return stack if model is None else stack.only(model)
    return stack.choose(model)


ONE_GROUP = "the model whose group it acts on (its name in spark-llm:models); required when the stack lists several"
TAKE_MODEL = {
    "status": "only this model (its name in spark-llm:models; default: every model)",
    "top": "only this model (its name in spark-llm:models; default: every model)",
    "logs": ONE_GROUP,
    "smoke": ONE_GROUP,
    "restart": ONE_GROUP,
    "rollback": ONE_GROUP,
}


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--stack", "-s", help="Pulumi stack (default: the selected one)")
    common.add_argument("--config-file", help="stack config file, as `pulumi --config-file` takes it")
    common.add_argument("--json", action="store_true", help="print JSON for scripts instead of tables")
    top = argparse.ArgumentParser(
        prog="spark-llm", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, parents=[common], help=help_text, description=module.__doc__)
        sub.formatter_class = argparse.RawDescriptionHelpFormatter
        if name in TAKE_MODEL:
            sub.add_argument("--model", metavar="NAME", help=TAKE_MODEL[name])
        module.add_arguments(sub)
    return top


# The commands that restart or redeploy the engine group.
CHANGES_NODES = ("restart", "rollback")


def main(argv: Sequence[str] | None = None) -> int:
    # `kill -USR1 <pid>` prints every thread's stack to stderr: what a command that seems hung is waiting for.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # A shell starts a background command with SIGINT ignored, and Python then keeps it ignored: `logs --follow`
    # run by a script or a supervisor would not stop on SIGINT. Ctrl-C always means stop here.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args = parser().parse_args(argv)
    # Ctrl-C anywhere (reading the stack's config with the Pulumi CLI takes a second or more) ends the command with
    # a line, not a traceback; the exit code is the shell's for SIGINT.
    try:
        return _run(args)
    except KeyboardInterrupt:
        # Only the commands that change the nodes leave something worth looking at.
        hint = "; `spark-llm status` shows what runs on the nodes" if args.command in CHANGES_NODES else ""
        sys.stderr.write(f"spark-llm {args.command}: interrupted{hint}\n")
        return 130


def _run(args: argparse.Namespace) -> int:
    pulumi = PulumiCli(stack=args.stack, config_file=args.config_file)
    module, _ = COMMANDS[args.command]
    plan: DeploymentPlan | StackPlan | None = None
    try:
        # A command that brings back an earlier config needs no plan of the current one (it may not even parse).
        if getattr(module, "USES_PLAN", True):
            stack = pulumi.load_stack()
            # Before any ssh: a missing, unreadable or open key is refused here as the program refuses it.
            key_files.check_keys(stack.key_files)
            plan = plan_for(args.command, stack, getattr(args, "model", None))
    except (ConfigError, PulumiError, key_files.KeyFileError, ModelChoiceError) as err:
        sys.stderr.write(f"spark-llm {args.command}: {err}\n")
        return 2
    try:
        return int(module.run(pulumi, plan, args))
    except (ConfigError, PulumiError) as err:
        sys.stderr.write(f"spark-llm {args.command}: {err}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
