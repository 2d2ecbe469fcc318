"""How Pulumi's providers reach each node: pulumi-command Connections and docker Providers, from the plan.

Both pin every hop's host key (the config's `hostKey`) and reach a worker through its `via` node (the head):
- pulumi-command (Go's x/crypto/ssh): `Connection.host_key`, `proxy` for the jump, the key's *contents* as
  `private_key`, a secret (pulumi-command also stores the whole connection as a secret);
- the docker provider (the docker client runs OpenSSH: `ssh -- user@host docker system dial-stdio`): `ssh_opts`
  with the key's *path*, `KnownHostsCommand` printing the pinned key (no known_hosts file to keep anywhere), and
  a `ProxyCommand` that pins the jump host the same way.

Key rotation must not restart anything: a connection is not in any resource's triggers, so a new key, user or port
is an `update` of each command (whose `update` script only says so, see components.commands) and an in-place
update of each docker provider.
"""

from __future__ import annotations

import shlex

import pulumi
import pulumi_command as command
import pulumi_docker as docker

from spark_llm.plan.hosts import SshHost, ssh_option_words


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


def docker_ssh_opts(target: SshHost) -> list[str]:
    """`ssh_opts` for the docker provider: the pinned hop, and for a worker a ProxyCommand through the head."""
    opts = ssh_option_words(target)
    if target.via is not None:
        via = target.via
        jump = ["ssh", *ssh_option_words(via), "-p", str(via.port), "-W", "%h:%p", f"{via.user}@{via.host}"]
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
