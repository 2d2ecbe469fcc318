"""Pure: the nodes init found, as the stack file it writes (stack_file.StackFile), each value with its source."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_llm.config.nodes import Node
from spark_llm.ops.init.facts import NodeFacts
from spark_llm.ops.init.stack_file import Extra, NodeEntry, StackFile, Value
from spark_llm.plan.hosts import SshHost

# A well-formed stand-in pin: node_names asks the config model whether a hostname is a node name.
_ANY_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFGBJAPekFDTDj60+HuK4DwDVxKqw/X8yBqkyYxH0krl"


@dataclass(frozen=True)
class Found:
    """One node as init reached and read it: `ssh` pinned to the key accepted, `how` the key was accepted,
    `found_by` how its address came to init (--head, --worker, the head's neighbour table)."""

    role: str
    ssh: SshHost
    facts: NodeFacts
    how: str
    found_by: str


def node_names(hostnames: list[str]) -> list[str]:
    """Each node's name in the stack: its hostname when that is a valid node name not taken yet, else spark-N."""
    names: list[str] = []
    for i, hostname in enumerate(hostnames, start=1):
        names.append(hostname if hostname and hostname not in names and _is_node_name(hostname) else f"spark-{i}")
    return names


def _is_node_name(name: str) -> bool:
    try:
        Node.model_validate(
            {"name": name, "role": "head", "host": "10.0.0.1", "user": "u", "fabricAddress": "10.0.0.1",
             "hostKey": _ANY_KEY}
        )  # fmt: skip
    except ValueError:
        return False
    return True


def summary(nodes: list[Found], names: list[str]) -> str:
    """One line for the file's header: each node's architecture, GPUs and memory."""
    parts = []
    for name, found in zip(names, nodes, strict=True):
        f = found.facts
        gpu = f"{len(f.gpus)}x {f.gpus[0]}" if f.gpus else "no GPU shown"
        mem = f"{f.mem_total / 1024**3:.1f} GiB" if f.mem_total else "memory unread"
        parts.append(f"{name} {f.arch} {gpu} {mem}")
    return "; ".join(parts)


def document(
    nodes: list[Found], key_path: str, extras: list[Extra], pulumi_keys: dict[str, Any], written: str
) -> StackFile:
    """The stack file for `nodes` (the head first); `written`: when and from where, for the header."""
    names = node_names([n.facts.hostname for n in nodes])
    entries = [_entry(found, name, names[0]) for found, name in zip(nodes, names, strict=True)]
    facts = [n.facts for n in nodes]
    ifaces = sorted({f.fabric_interface for f in facts if f.fabric_interface})
    devices = sorted({d for f in facts for d in f.twins(f.fabric_interface or "")}, key=str.lower)
    mtus = sorted({f.interfaces[f.fabric_interface].mtu for f in facts if f.fabric_interface}, key=str)
    network = {
        "fabricInterfaces": Value(ifaces, "the netdev under the ACTIVE RoCE port (/sys/class/infiniband/*/device/net)"),
        "roceDevices": Value(devices, "the port's RoCE twins, ACTIVE (/sys/class/infiniband/*/ports/1/state)"),
        "mtu": Value(mtus[0] if mtus else 9000, f"{', '.join(ifaces)}'s MTU (ip link), equal on every node"),
    }
    header = (
        f"Written by `spark-llm init` {written}.\n"
        "Each discovered value says where it came from: check it on the node with the command named.\n"
        f"Found: {summary(nodes, names)}.\n"
        "`pulumi config set` rewrites this file without these comments."
    )
    return StackFile(header, pulumi_keys, Value(key_path, "--key"), entries, network, extras)


def _entry(found: Found, name: str, head: str) -> NodeEntry:
    facts = found.facts
    iface = facts.fabric_interface or ""
    address = facts.address_on(iface)
    twins = facts.twins(iface)
    named_by = "hostname -s" if name == facts.hostname else f"its hostname {facts.hostname!r} is not a node name"
    return NodeEntry(
        name=Value(name, named_by),
        role=found.role,
        host=Value(found.ssh.host, found.found_by),
        port=found.ssh.port,
        user=found.ssh.user,
        fabric_address=Value(
            str(address.ip) if address else "", f"{iface}'s IPv4 (ip -4 addr), over RoCE {', '.join(twins)} ACTIVE"
        ),
        host_key=Value(found.ssh.host_key, found.how),
        via=head if found.role == "worker" else None,
    )
