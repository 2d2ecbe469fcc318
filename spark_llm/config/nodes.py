"""The nodes of the stack config: how each is reached over SSH and on the fabric, and the rules between them.

One head (rank 0, serves the API, every worker's jump host) and its workers. A worker is reached directly
from the operator's machine, or through the head (`via: <the head>`); nothing else: the probe, the weights
fan-out and the image transfer all reach a worker either way, and no step knows a longer chain of jumps.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from spark_llm.config.base import ConfigModel, Int, KeyedError, Port, SeveralKeyedError

_NAME = re.compile(r"^[a-z][a-z0-9-]*$")
NAME_MAX = 31
_HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
_HOST_KEY = re.compile(r"^(ssh-ed25519|ecdsa-sha2-nistp256|ssh-rsa) [A-Za-z0-9+/=]{40,}( .*)?$")
_KEYSCAN = "copy the line `ssh-keyscan -t ed25519 HOST` prints"


def _node_name(v: str) -> str:
    if not _NAME.match(v) or len(v) > NAME_MAX:
        raise ValueError(f"must be 1-{NAME_MAX} lowercase letters, digits and '-', starting with a letter")
    return v


def _address(v: str) -> str:
    """An IP address or a host name; the usual slips (user@, :port, a URL) are named with where the part goes."""
    try:
        ipaddress.ip_address(v)
        return v
    except ValueError:
        pass
    # The example is the address the user meant: what is left once the part that goes elsewhere is taken out.
    if "://" in v:
        address = v.split("://", 1)[1].rpartition("@")[2].split("/")[0].split(":")[0]
        raise KeyedError("is a URL: write the address alone (the port goes in `port`, the user in `user`)", (), address)
    if "@" in v:
        raise KeyedError("holds a user: write the address alone and the user in `user`", (), v.rpartition("@")[2])
    host, colon, port = v.rpartition(":")
    if colon and port.isdigit() and host and ":" not in host:
        raise KeyedError(f"holds a port: write {host} here and {port} in `port`", (), host)
    if not _HOST_NAME.match(v):
        raise ValueError("must be an IP address or a host name")
    return v


def _fabric_ip(v: str) -> str:
    """A node's own IP address on the direct link: no name (NCCL binds to it), no prefix, not a wildcard."""
    if "/" in v:
        raise ValueError(f"holds a prefix length: write the address alone ({v.split('/')[0]})")
    try:
        address = ipaddress.ip_address(v)
    except ValueError:
        raise ValueError("must be an IP address (NCCL and the engines bind to it; no host names)") from None
    if address.is_unspecified or address.is_loopback or address.is_multicast:
        raise ValueError(f"{v} is not one node's address on the fabric: give the address of its fabric port")
    return v


def _listen_ip(v: str) -> str:
    """An address the head's API binds to: one IP address of the head, or a wildcard (every address)."""
    try:
        ipaddress.ip_address(v)
    except ValueError:
        raise ValueError("must be an IP address of the head (no host name), or 0.0.0.0 for every address") from None
    return v


def _host_key(v: str) -> str:
    line = v.strip()
    if not _HOST_KEY.match(line):
        raise ValueError("must be an OpenSSH public host key line ('ssh-ed25519 AAAA...')")
    kind, body = line.split()[:2]
    try:
        blob = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"is not valid base64; {_KEYSCAN}") from None
    length = int.from_bytes(blob[:4], "big") if len(blob) >= 4 else -1
    if blob[4 : 4 + length].decode(errors="replace") != kind:
        raise ValueError(f"the key data does not hold a {kind} key; {_KEYSCAN}")
    # The placeholder (all-zero key data) is refused by check_topology, which knows where the node is reached from
    # and so can print the ssh-keyscan that reads its real key.
    return line


def keyscan_type(key_type: str) -> str:
    """`ssh-ed25519` (a key line's type) -> `ed25519` (what `ssh-keyscan -t` takes, and the host key file's name)."""
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(
        key_type, "ecdsa" if key_type.startswith("ecdsa") else key_type
    )


def is_placeholder_key(line: str) -> bool:
    """A well-formed key line whose key data is all zeros: the committed example's stand-in for a real pin."""
    blob = base64.b64decode(line.split()[1])
    length = int.from_bytes(blob[:4], "big")
    return not blob[4 + length + 4 :].strip(b"\0")


def _placeholder_fix(node: Node) -> str:
    """What to do about a placeholder hostKey: the ssh-keyscan that reads the node's real key, and where to run it."""
    kind = keyscan_type(node.host_key.split()[0])
    scan = f"`ssh-keyscan -t {kind} -p {node.port} {node.host}`"
    where = f"on {node.via} ({node.host} is this node's address as {node.via} reaches it)" if node.via else "here"
    return (
        f"is the placeholder; pin {node.name}'s real key: run {scan} {where}, check it against the node's own "
        f"(on its console: `cat /etc/ssh/ssh_host_{kind}_key.pub`) "
        "and set this key to its `TYPE AAAA...` part (the two fields after the address)"
    )


NodeName = Annotated[str, AfterValidator(_node_name)]
Address = Annotated[str, AfterValidator(_address)]
FabricIp = Annotated[str, AfterValidator(_fabric_ip)]
HostKey = Annotated[str, AfterValidator(_host_key)]
ListenIp = Annotated[str, AfterValidator(_listen_ip)]


class Node(ConfigModel):
    """One machine: reached over SSH at `host` (from the operator, or from `via`), on the fabric at `fabricAddress`."""

    name: NodeName = Field(
        description="Node name used in logs, ssh_config and `via`", json_schema_extra={"example": "spark-2"}
    )
    role: Literal["head", "worker"] = Field(
        description="head (rank 0, serves the API) or worker", json_schema_extra={"example": "worker"}
    )
    host: Address = Field(
        description="SSH address: from the operator, or from the `via` node",
        json_schema_extra={"example": "192.168.200.13"},
    )
    port: Port = Field(22, description="SSH port")
    user: str = Field(
        "root",
        min_length=1,
        description="SSH login user (in the docker group)",
        json_schema_extra={"example": "aurora"},
    )
    fabric_address: FabricIp = Field(
        description="Address on the direct node-to-node link", json_schema_extra={"example": "192.168.200.13"}
    )
    host_key: HostKey = Field(
        description="Pinned SSH host key of the node",
        json_schema_extra={"example": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... (ssh-keyscan -t ed25519 HOST)"},
    )
    via: NodeName | None = Field(
        None,
        description="A worker reached through the head: the head's name (unset: reached directly; the head has none)",
        json_schema_extra={"example": "spark-1"},
    )
    key_path: str | None = Field(
        None,
        description="SSH private key for this node (default: sshKeyPath)",
        json_schema_extra={"example": "~/.ssh/id_ed25519"},
    )
    sm_clock_cap_mhz: Int | None = Field(
        None,
        gt=0,
        description=(
            "Cap of the GPU's SM clock in MHz (`nvidia-smi --lock-gpu-clocks=0,CAP`), applied by `pulumi up`, removed"
            " by destroy or when unset; within the GPU's range (unset: the driver's own clocks)"
        ),
        json_schema_extra={"example": 2000},
    )


def check_topology(nodes: list[Node]) -> list[Node]:
    """One head, distinct names and addresses, `via` only ever the head, one login user; KeyedError names the key."""
    heads = [n for n in nodes if n.role == "head"]
    if len(heads) != 1:
        named = ", ".join(f"nodes[{i}] {n.name}" for i, n in enumerate(nodes) if n.role == "head")
        raise ValueError(
            f"exactly one node needs role: head (found {len(heads)}{': ' + named if named else ''}); "
            "the head serves the API, every other node is a worker"
        )
    head = heads[0]
    seen: dict[tuple[str, str], int] = {}
    for i, node in enumerate(nodes):
        # A host is the same machine only when reached the same way (from here, or through the same jump host).
        for key, shown, same in (
            ("name", node.name, node.name),
            ("fabricAddress", node.fabric_address, node.fabric_address),
            ("host", node.host, f"{node.via}>{node.host}"),
        ):
            j = seen.setdefault((key, same), i)
            if j != i:
                owner = "" if key == "name" else f" ({nodes[j].name})"
                why = f"{shown} is already the {key} of nodes[{j}]{owner}: each node needs its own {key}"
                raise KeyedError(why, (i, key), show_example=False)
    for i, node in enumerate(nodes):
        if node.via is None:
            continue
        if node.role == "head":
            why = f"the head is reached directly (it is the workers' jump host): remove via: {node.via}"
            raise KeyedError(why, (i, "via"))
        if node.via == node.name:
            raise KeyedError(f"{node.name} cannot be reached through itself: via names the head", (i, "via"), head.name)
        if node.via not in {n.name for n in nodes}:
            raise KeyedError(f"{node.via!r} is not a node name: via names the head", (i, "via"), head.name)
        if node.via != head.name:
            raise KeyedError(
                f"{node.via} is a worker: a worker is reached through the head ({head.name}) or directly (no via)",
                (i, "via"),
                head.name,
            )
    for i, node in enumerate(nodes):
        if node.user != head.user:
            raise KeyedError(
                f"{node.user} differs from the head's user {head.user}: every node logs in as the same user "
                "(the launch script is identical everywhere)",
                (i, "user"),
                head.user,
            )
    # Every placeholder at once: the committed example has one per node, and naming the first alone made the user
    # scan, edit and run again for each (issue 31, 10).
    placeholders = [
        KeyedError(_placeholder_fix(node), (i, "hostKey"), show_example=False)
        for i, node in enumerate(nodes)
        if is_placeholder_key(node.host_key)
    ]
    if len(placeholders) > 1:
        raise SeveralKeyedError(placeholders)
    if placeholders:
        raise placeholders[0]
    return nodes
