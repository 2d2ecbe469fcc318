"""How Pulumi's providers reach each node: pulumi-command Connections and docker Providers, from the plan.

Both pin every hop's host key (the config's `hostKey`) and reach a worker through its `via` node (the head):
- pulumi-command (Go's x/crypto/ssh): `Connection.host_key`, `proxy` for the jump, the key's *contents* as
  `private_key`, a secret (pulumi-command also stores the whole connection as a secret);
- the docker provider (the docker client runs OpenSSH: `ssh -- user@host docker system dial-stdio`): `ssh_opts`
  with the key's *path*, `KnownHostsCommand` printing the pinned key (no known_hosts file to keep anywhere), and
  a `ProxyCommand` that pins the jump host the same way.

Key rotation must not restart anything: a connection is not in any resource's triggers, so a new key, user or port
is an `update` of each command (whose `update` script only says so, see spark_llm.commands) and an in-place
update of each docker provider.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from spark_llm.config import NAMESPACE, StackConfig
from spark_llm.ssh import SshHost


class KeyFileError(ValueError):
    """A configured ssh key file cannot be read; the message names the config key."""


@dataclass(frozen=True)
class KeyFile:
    path: str
    """Absolute path on this machine."""
    config_key: str
    """The stack config key that names it (for errors)."""


def key_files(cfg: StackConfig) -> dict[str, KeyFile]:
    """Every node's key file by node name, with the key of the config that names it."""
    out = {}
    for i, node in enumerate(cfg.nodes):
        if node.key_path:
            out[node.name] = KeyFile(os.path.expanduser(node.key_path), f"{NAMESPACE}:nodes[{i}].keyPath")
        else:
            out[node.name] = KeyFile(os.path.expanduser(cfg.ssh_key_path), f"{NAMESPACE}:sshKeyPath")
    return out


def read_keys(cfg: StackConfig) -> dict[str, str]:
    """The private keys' contents by path, read once at program run (preview too).

    A missing or unreadable key stops the program before any resource is declared: nothing runs on any node, and
    no state records a connection that cannot work.
    """
    contents: dict[str, str] = {}
    problems = []
    for key in key_files(cfg).values():
        if key.path in contents:
            continue
        try:
            text = Path(key.path).read_text()
        except OSError as exc:
            problems.append(f"{key.config_key}: cannot read the ssh private key {key.path}: {exc.strerror}")
            continue
        if "PRIVATE KEY" not in text:
            problems.append(f"{key.config_key}: {key.path} is not an ssh private key (the .pub file?)")
            continue
        contents[key.path] = text
    if problems:
        raise KeyFileError(
            "\n".join(problems)
            + f"\nSet it to a private key the nodes accept (e.g. `pulumi config set {NAMESPACE}:sshKeyPath"
            " ~/.ssh/id_ed25519`). Nothing was run on any node."
        )
    return contents


def _command_hop(hop: SshHost, keys: dict[str, str]) -> dict:
    return {
        "host": hop.host,
        "port": hop.port,
        "user": hop.user,
        "private_key": pulumi.Output.secret(keys[hop.key_path]),
        # Pinned: without host_key pulumi-command does not check the server at all.
        "host_key": hop.host_key.strip(),
        # A node that is down fails the step within a minute instead of after ten dial attempts.
        "dial_error_limit": 4,
        "per_dial_timeout": 15,
    }


def command_connection(target: SshHost, keys: dict[str, str]) -> command.remote.ConnectionArgs:
    """pulumi-command's connection to `target`, through its jump host (pulumi-command allows one hop)."""
    if target.via is not None and target.via.via is not None:
        raise ValueError(f"{target.name}: pulumi-command reaches a node through one jump host at most")
    proxy = command.remote.ProxyConnectionArgs(**_command_hop(target.via, keys)) if target.via else None
    return command.remote.ConnectionArgs(**_command_hop(target, keys), proxy=proxy)


def _ssh_options(hop: SshHost) -> list[str]:
    """OpenSSH options that authenticate with the node's key file and accept only its pinned host key."""
    key_type, key_body = hop.host_key.split()[:2]
    return [
        "-i",
        hop.key_path,
        "-o",
        "IdentitiesOnly=yes",
        # Known hosts come from the config alone, under the node's name: no file here to go stale.
        "-o",
        f"HostKeyAlias={hop.name}",
        "-o",
        f"KnownHostsCommand=/bin/echo {hop.name} {key_type} {key_body}",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "GlobalKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "ConnectTimeout=15",
        # A dead node fails the step within a minute.
        "-o",
        "ServerAliveInterval=15",
        "-o",
        "ServerAliveCountMax=4",
        "-o",
        "LogLevel=ERROR",
    ]


def docker_ssh_opts(target: SshHost) -> list[str]:
    """`ssh_opts` for the docker provider: the pinned hop, and for a worker a ProxyCommand through the head."""
    opts = _ssh_options(target)
    if target.via is not None:
        via = target.via
        jump = ["ssh", *_ssh_options(via), "-p", str(via.port), "-W", "%h:%p", f"{via.user}@{via.host}"]
        # ssh runs ProxyCommand through the shell: each word quoted once.
        opts += ["-o", "ProxyCommand=" + " ".join(shlex.quote(w) if w != "%h:%p" else w for w in jump)]
    return opts


def ssh_command(target: SshHost) -> list[str]:
    """OpenSSH's argv to `target` (without the destination, see `ssh_destination`), pinned as for docker.

    For scripts run on the operator's machine (pulumi-command local commands): the key's path, never its
    contents, and no known_hosts file to keep.
    """
    return ["ssh", *docker_ssh_opts(target), "-p", str(target.port)]


def ssh_destination(target: SshHost) -> str:
    return f"{target.user}@{target.host}"


def docker_provider(name: str, target: SshHost, opts: pulumi.ResourceOptions | None = None) -> docker.Provider:
    """One docker provider per node: its engine over ssh, never the operator's own."""
    return docker.Provider(
        name,
        host=f"ssh://{target.user}@{target.host}:{target.port}",
        ssh_opts=docker_ssh_opts(target),
        opts=opts,
    )
