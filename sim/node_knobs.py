"""`sim roce` and `sim host-field`: what a node shows the product, turned by a test.

- `roce on|off`: the node's /dev/infiniband (uverbs character devices, as the ConnectX-7's two RoCE twins make
  on a Spark), which spark-llm:network.roceDevices mounts into the engine containers. The sim has no RDMA: the
  stand-in engine treats a mounted /dev/infiniband as RoCE found (sim/engine/standin_engine/nccl.py).
  /sys/class/infiniband stays absent: sysfs cannot be written from a node.
- `host-field NODE kernel VALUE|off`: a bind mount over the node's /proc/sys/kernel/osrelease (what the product
  reads as the kernel version; `uname -r` keeps the real one), as after a kernel update and reboot.
"""

from __future__ import annotations

from collections.abc import Sequence

from host import SimError, docker
from paths import SimPaths
from state import ClusterState

# uverbs0/1 (major 231, minors 192+), as `ls -l /dev/infiniband` shows them on a host with two RDMA devices.
VERBS = (("uverbs0", 192), ("uverbs1", 193))
HOST_FIELDS = {"kernel": "/proc/sys/kernel/osrelease"}


def _nodes(paths: SimPaths, names: Sequence[str]) -> list:
    state = ClusterState.load(paths.state_file)
    if state is None or not state.nodes:
        raise SimError(f"no sim cluster recorded in {paths.state_dir} (run: sim/sim up)")
    unknown = set(names) - {n.name for n in state.nodes}
    if unknown:
        raise SimError(f"no node {', '.join(sorted(unknown))} (nodes: {', '.join(n.name for n in state.nodes)})")
    return [n for n in state.nodes if not names or n.name in names]


def roce(paths: SimPaths, on: bool, nodes: Sequence[str] = ()) -> None:
    """Create (on) or remove (off) each node's /dev/infiniband."""
    for node in _nodes(paths, nodes):
        if on:
            make = "".join(
                f"[ -e /dev/infiniband/{name} ] || mknod -m 666 /dev/infiniband/{name} c 231 {minor}; "
                for name, minor in VERBS
            )
            docker("exec", node.container, "sh", "-c", f"mkdir -p /dev/infiniband && {make}")
        else:
            docker("exec", node.container, "rm", "-rf", "/dev/infiniband")
        print(f"{node.name}: /dev/infiniband " + ("with " + ", ".join(n for n, _ in VERBS) if on else "removed"))


def host_field(paths: SimPaths, node_name: str, field: str, value: str) -> None:
    """Make `field` of a node read `value` (or its own again with `off`)."""
    if field not in HOST_FIELDS:
        raise SimError(f"host field {field!r} is not one the sim can change (fields: {', '.join(HOST_FIELDS)})")
    (node,) = _nodes(paths, [node_name])
    path = HOST_FIELDS[field]
    # Undo an earlier override first, so `on` twice does not stack mounts and `off` is idempotent.
    docker("exec", node.container, "sh", "-c", f"while umount {path} 2>/dev/null; do :; done")
    if value != "off":
        saved = f"/run/spark-llm-host-{field}"
        docker("exec", node.container, "sh", "-c", f'printf "%s\\n" "$1" > {saved} && mount --bind {saved} {path}',
               "sh", value)  # fmt: skip
    shown = docker("exec", node.container, "cat", path).strip()
    print(f"{node.name}: {field} ({path}) reads {shown}")
