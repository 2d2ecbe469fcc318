"""SSH material of a cluster: the operator's and the fabric key, the nodes' pinned host keys (.sim/known_hosts, on
every node too), .sim/ssh_config, and whether ssh to a node works with them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from host import docker, run
from paths import SimPaths
from state import Node

SSH_READY_TIMEOUT_S = 60
SSH_CONNECT_TIMEOUT_S = 5


def ensure_keypair(path: Path, comment: str) -> None:
    if path.exists() and path.with_suffix(".pub").exists():
        return
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    path.chmod(0o600)


def known_hosts_text(nodes: Sequence[Node], *, include_mgmt: bool) -> str:
    lines = []
    for node in nodes:
        hosts = [node.name]
        if include_mgmt and node.mgmt_address:
            hosts.append(node.mgmt_address)
        hosts.append(node.fabric_address)
        lines.append(f"{','.join(hosts)} {node.host_key}")
    return "\n".join(lines) + "\n"


def ssh_config_text(paths: SimPaths, nodes: Sequence[Node]) -> str:
    blocks = ["# Written by `sim up`; do not edit. Usage: ssh -F .sim/ssh_config head|worker-N\n"]
    for node in nodes:
        block = f"Host {node.name}\n  HostName {node.ssh_host}\n"
        if node.role == "worker":
            block += "  ProxyJump head\n"
        blocks.append(block)
    blocks.append(
        "Host *\n"
        "  User root\n"
        "  Port 22\n"
        f"  IdentityFile {paths.operator_key}\n"
        "  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {paths.known_hosts}\n"
        "  StrictHostKeyChecking yes\n"
    )
    return "\n".join(blocks)


def write_private(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    tmp.replace(path)


def install_node_ssh(paths: SimPaths, nodes: Sequence[Node]) -> None:
    """Give every node the operator's and the fabric key as authorized keys, the fabric key as its
    own identity (node-to-node ssh, as between the real Sparks) and the nodes' pinned host keys."""
    authorized = paths.operator_key.with_suffix(".pub").read_text() + paths.fabric_key.with_suffix(".pub").read_text()
    files = {
        "authorized_keys": authorized,
        "id_ed25519": paths.fabric_key.read_text(),
        "id_ed25519.pub": paths.fabric_key.with_suffix(".pub").read_text(),
        "known_hosts": known_hosts_text(nodes, include_mgmt=False),
    }
    for node in nodes:
        for name, text in files.items():
            docker(
                "exec",
                "-i",
                node.container,
                "sh",
                "-c",
                f"umask 077 && mkdir -p /root/.ssh && cat > /root/.ssh/{name}.tmp"
                f" && mv /root/.ssh/{name}.tmp /root/.ssh/{name}",
                stdin_text=text,
            )


def ssh_command(paths: SimPaths, node: str, *remote: str) -> list[str]:
    return [
        "ssh",
        "-F",
        str(paths.ssh_config),
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={SSH_CONNECT_TIMEOUT_S}",
        node,
        *remote,
    ]


def ssh_ok(paths: SimPaths, node: str) -> bool:
    return run(ssh_command(paths, node, "true"), check=False, timeout=30).returncode == 0
