"""Pure: a node as ssh reaches it (address, user, key path, pinned host key, jump host), as the plan builds it,
and the one list of OpenSSH options every spark-llm ssh uses.

spark_llm.remote.ssh runs commands on such a host; components.connection turns it into the providers'
connections; spark_llm.plan.fabric reaches a worker from the head. Kept here so the plan, and what reads the plan,
need no I/O module for the type, and so that all three take their options from one place (`SSH_OPTIONS`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from spark_llm.config import NAMESPACE, Node, StackConfig


@dataclass(frozen=True)
class KeyFile:
    """The operator's ssh private key for a node, resolved once (`key_files`)."""

    path: str
    """Absolute path on this machine."""
    config_key: str
    """The stack config key that names it (for errors): `spark-llm:sshKeyPath` or `spark-llm:nodes[i].keyPath`."""


@dataclass(frozen=True)
class SshHost:
    """One node as ssh reaches it: `host` is the address as seen from the operator, or from `via` if set."""

    name: str
    host: str
    port: int
    user: str
    key_path: str
    host_key: str
    via: SshHost | None = None

    @classmethod
    def from_props(cls, props: Mapping) -> SshHost:
        """Rebuild from the plain dict a Pulumi resource stores (see `to_props`)."""
        via = props.get("via")
        return cls(
            name=props["name"],
            host=props["host"],
            port=int(props["port"]),
            user=props["user"],
            key_path=props["key_path"],
            host_key=props["host_key"],
            via=cls.from_props(via) if via else None,
        )

    def to_props(self) -> dict:
        return {
            "name": self.name,
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "key_path": self.key_path,
            "host_key": self.host_key,
            "via": self.via.to_props() if self.via else None,
        }

    def chain(self) -> list[SshHost]:
        """This host and every jump host before it, outermost first."""
        return (self.via.chain() if self.via else []) + [self]


# The options of every OpenSSH connection spark-llm makes, from this machine or from the head (plan.fabric): the
# given key only, the pinned host key only, never a prompt, and a dead node found within a minute instead of a
# step hanging forever. The order is part of the fabric scripts' bytes (their digest is a step's trigger): keep it.
SSH_OPTIONS: tuple[tuple[str, str], ...] = (
    ("IdentitiesOnly", "yes"),
    ("BatchMode", "yes"),
    ("StrictHostKeyChecking", "yes"),
    ("GlobalKnownHostsFile", "/dev/null"),
    ("ConnectTimeout", "15"),
    ("ServerAliveInterval", "15"),
    ("ServerAliveCountMax", "4"),
)


def known_hosts_line(hop: SshHost) -> str:
    """The hop's pin as a known_hosts line: `NAME TYPE BASE64`, by node name (its HostKeyAlias), not address, so
    one pin serves every address the node is reached on."""
    key_type, key_body = hop.host_key.split()[:2]
    return f"{hop.name} {key_type} {key_body}"


def operator_ssh_options(hop: SshHost, known_hosts_file: str | None = None) -> list[tuple[str, str]]:
    """Every option of an ssh from this machine to `hop` (besides address, port, user and key file): the pin and
    SSH_OPTIONS, with ssh's errors only (they name the hop whose key was refused: remote.ssh.host_key_mismatch).

    `known_hosts_file`: a file holding `known_hosts_line` (remote.ssh writes one per run); None: the pin is
    printed by KnownHostsCommand (the docker provider and pulumi-command local steps: no file to keep anywhere).
    """
    if known_hosts_file is not None:
        pin = [("UserKnownHostsFile", known_hosts_file)]
    else:
        pin = [("KnownHostsCommand", f"/bin/echo {known_hosts_line(hop)}"), ("UserKnownHostsFile", "/dev/null")]
    return [("HostKeyAlias", hop.name), *pin, *SSH_OPTIONS, ("LogLevel", "ERROR")]


def ssh_option_words(hop: SshHost) -> list[str]:
    """`operator_ssh_options` as OpenSSH's argv words, with the key file and the pin printed by KnownHostsCommand:
    for the docker provider, pulumi-command's local steps and a command printed for a person (an ssh tunnel)."""
    options = [word for key, value in operator_ssh_options(hop) for word in ("-o", f"{key}={value}")]
    return ["-i", hop.key_path, *options]


# ---------- the stack's nodes, resolved once ----------


def key_files(cfg: StackConfig) -> dict[str, KeyFile]:
    """Every node's ssh key file by node name, with the config key that names it: the one place a key path is
    resolved (the program reads them, the CLI checks their modes, ssh uses them). The stack's, once for every
    group."""
    out = {}
    for i, node in enumerate(cfg.nodes):
        if node.key_path:
            out[node.name] = KeyFile(os.path.expanduser(node.key_path), f"{NAMESPACE}:nodes[{i}].keyPath")
        else:
            out[node.name] = KeyFile(os.path.expanduser(cfg.ssh_key_path), f"{NAMESPACE}:sshKeyPath")
    return out


def ssh_hosts(cfg: StackConfig) -> dict[str, SshHost]:
    """Every node as ssh reaches it; a node with `via` goes through that node as a jump host."""
    hosts: dict[str, SshHost] = {}
    keys = key_files(cfg)

    def build(node: Node) -> SshHost:
        if node.name not in hosts:
            via = build(next(n for n in cfg.nodes if n.name == node.via)) if node.via else None
            hosts[node.name] = SshHost(
                name=node.name,
                host=node.host,
                port=node.port,
                user=node.user,
                key_path=keys[node.name].path,
                host_key=node.host_key,
                via=via,
            )
        return hosts[node.name]

    for node in cfg.nodes:
        build(node)
    return hosts
