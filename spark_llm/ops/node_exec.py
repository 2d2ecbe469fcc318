"""`spark-llm exec NODE -- COMMAND...`: one command on one node, reached as `pulumi up` reaches it.

The stack's key, every hop's pinned `hostKey` and, for a worker, the head as jump host (spark_llm.remote.ssh): the form
in which the program and the other commands print a fix to run on a node (spark_llm.plan.node_commands), since a bare
`ssh root@HOST ...` has neither the key nor the pin. stdin, stdout and stderr are this terminal's; the exit code
is the command's (255: ssh itself failed, its reason on stderr: `spark-llm preflight` tells more).
"""

from __future__ import annotations

import argparse
import sys

from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.plan.stack import StackPlan
from spark_llm.remote.runner import run_attached


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("node", help="the node's name in spark-llm:nodes (e.g. head, worker-1)")
    parser.add_argument(
        "remote", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command and its arguments, after --"
    )


def remote_command(args: argparse.Namespace) -> list[str]:
    """The command's argv as given after the node (argparse may or may not keep the `--` before it)."""
    return args.remote[1:] if args.remote[:1] == ["--"] else list(args.remote)


def run(pulumi: PulumiCli, stack: StackPlan, args: argparse.Namespace) -> int:
    names = list(stack.hosts)
    node = stack.hosts.get(args.node)
    if node is None:
        sys.stderr.write(
            f"spark-llm exec: no node named {args.node!r} in spark-llm:nodes; the stack's nodes: {', '.join(names)} "
            f"(e.g. `spark-llm exec {names[0]} -- docker ps`)\n"
        )
        return 2
    remote = remote_command(args)
    if not remote:
        sys.stderr.write(f"spark-llm exec: no command given; e.g. `spark-llm exec {node.name} -- docker ps`\n")
        return 2
    return run_attached(node, remote)
