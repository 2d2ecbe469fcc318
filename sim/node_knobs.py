"""`sim roce` and `sim host-field`: what a node shows the product, turned by a test.

- `roce on|off`: the node's /dev/infiniband (uverbs character devices, which spark-llm:network.roceDevices mounts
  into the engine containers) and /sys/class/infiniband (each device ACTIVE on the fabric interface, with GIDs),
  as a Spark's ConnectX-7 twins show them (sim/roce.sh). The sim has no RDMA: the stand-in engine "finds" the devices
  of the /dev/infiniband mounted in its container that NCCL_IB_HCA selects, named in the node's cache dir
  (sim/engine/standin_engine/nccl.py).
- `host-field NODE kernel VALUE|off`: a bind mount over the node's /proc/sys/kernel/osrelease (what the product
  reads as the kernel version; `uname -r` keeps the real one), as after a kernel update and reboot.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from host import SimError, docker
from links import fabric_interface
from paths import SimPaths
from state import ClusterState

# The two RoCE devices ("twins") of a Spark's first ConnectX-7 port, the names spark-llm:network.roceDevices takes.
DEVICES = ("rocep1s0f0", "roceP2p1s0f0")
ROCE_SCRIPT = Path(__file__).resolve().parent / "roce.sh"
HOST_FIELDS = {"kernel": "/proc/sys/kernel/osrelease"}


def _nodes(paths: SimPaths, names: Sequence[str]) -> list:
    state = ClusterState.load(paths.state_file)
    if state is None or not state.nodes:
        raise SimError(f"no sim cluster recorded in {paths.state_dir} (run: sim/sim up)")
    unknown = set(names) - {n.name for n in state.nodes}
    if unknown:
        raise SimError(f"no node {', '.join(sorted(unknown))} (nodes: {', '.join(n.name for n in state.nodes)})")
    return [n for n in state.nodes if not names or n.name in names]


def roce(paths: SimPaths, on: bool, nodes: Sequence[str] = (), devices: Sequence[str] = DEVICES) -> None:
    """Give (on) or take (off) each node's RoCE devices: /dev/infiniband and /sys/class/infiniband (sim/roce.sh)."""
    script = ROCE_SCRIPT.read_text()
    for node in _nodes(paths, nodes):
        args = ["off"]
        if on:
            iface = fabric_interface(node.container, node.fabric_address)
            args = ["on", iface, node.fabric_address, *devices]
        docker("exec", "-i", node.container, "bash", "-s", "--", *args, stdin_text=script)
        print(f"{node.name}: " + (f"RoCE devices {', '.join(devices)} on {iface}" if on else "no RoCE devices"))


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
