"""Pure: the commands the program prints for a person to run on a node, spelled so that they work as printed.

A bare `ssh -p 22 root@HOST ...` has neither the node's key nor its pinned host key (nor, for a worker, the head
as jump host) and fails with "Host key verification failed". A command on a node is printed as
`spark-llm exec --stack STACK NODE -- CMD...` instead: the operator CLI's one ssh (spark_llm.remote.ssh, the stack's key
and pinned `hostKey` of every hop, workers through the head), so it reaches the node exactly as `pulumi up` does.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from spark_llm.config.nodes import keyscan_type
from spark_llm.plan.deployment import DeploymentPlan, NodePlan


@dataclass(frozen=True)
class StackRef:
    """The stack a printed command is for, as the command that prints it was given it."""

    name: str | None = None
    """None: the selected stack."""
    config_file: str | None = None
    """None: Pulumi.<stack>.yaml beside Pulumi.yaml."""

    def exec_on(self, node: str, command: Sequence[str]) -> str:
        """`spark-llm exec` of `command` on `node`, quoted for a POSIX shell."""
        chosen = (["--stack", self.name] if self.name else []) + (
            ["--config-file", self.config_file] if self.config_file else []
        )
        return shlex.join(["spark-llm", "exec", *chosen, node, "--", *command])


SELECTED = StackRef()
"""The selected stack with its default config file."""


def exec_on(stack: str | None, node: str, command: Sequence[str]) -> str:
    """`spark-llm exec` of `command` on `node` of `stack` (None: the selected one), quoted for a POSIX shell."""
    return StackRef(stack).exec_on(node, command)


def read_host_key(stack: StackRef, node: NodePlan) -> str:
    """The command that prints the host key `node` presents, run where its `host` is meant: here, or on its
    jump host (a worker's `host` is its address as the head sees it)."""
    hop = node.ssh
    scan = ["ssh-keyscan", "-t", keyscan_type(hop.host_key.split()[0]), "-p", str(hop.port), hop.host]
    return stack.exec_on(hop.via.name, scan) if hop.via else shlex.join(scan)


def host_key_refused(plan: DeploymentPlan, stack: str, name: str) -> str:
    """What `pulumi preview`/`up` says when ssh refused `name`'s host key: the config key, how to read the key
    the node presents, and what to do with it."""
    node = next(n for n in plan.nodes if n.name == name)
    hop = node.ssh
    key = f"{node.config_key}.hostKey"
    where = f"{hop.user}@{hop.host}:{hop.port}" + (f" via {hop.via.name}" if hop.via else "")
    key_type = hop.host_key.split()[0]
    return (
        f"{key} is not the host key {name} presents ({where}): ssh refused to connect, as it must.\n"
        f"If {name} was reinstalled or its ssh host keys were made anew, read the key it presents:\n"
        f"  {read_host_key(StackRef(stack), node)}\n"
        f"compare it with the node's own (on its console: `cat /etc/ssh/ssh_host_{keyscan_type(key_type)}_key.pub`),"
        f" then put its `{key_type} AAAA...` part (the two fields after the address) into {key}"
        " and run `pulumi preview` again.\n"
        f"If it was not, something else answers at {hop.host}: keep the pin and find out what."
    )
