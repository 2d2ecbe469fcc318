"""NCCL's INIT,NET lines, as a rank prints them with NCCL_DEBUG=INFO during its distributed init.

The shapes are NVIDIA/nccl's (2.27-2.30): each line `host:pid:tid [dev] NCCL INFO <text>` (src/debug.cc);
`NET/IB : Using [0]dev:1/RoCE ... [RO]; OOB if:addr<0>` (src/transport/net_ib/init.cc), or `NET/IB : No device
found.` and `NET/Socket : Using [0]if:addr<0>` (src/transport/net_socket.cc); `Using network IB|Socket`
(src/init.cc); `Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0` (src/transport/net.cc).

RoCE is "found" as NCCL finds it on a Spark: NCCL opens the devices the container has (/dev/infiniband/uverbsN, what
the product mounts with spark-llm:network.roceDevices, each named as libibverbs names it from
/sys/class/infiniband_verbs/uverbsN/ibdev) that NCCL_IB_HCA selects, and its `NET/IB : Using` line lists those only:
a name in NCCL_IB_HCA that no device has is not listed, and with none left it finds no device and falls back to
sockets. The engine container's sysfs is not the node's (`sim/sim roce` fakes the node's), so the names come from
the file DEVICE_NAMES_FILE names (default ~/.cache/standin-rdma-devices, the node's cache dir: `uverbsN NAME` lines,
written by `sim/sim roce on`). The knob: while the file SOCKET_FALLBACK_FILE names (default
~/.cache/standin-nccl-socket) exists, the rank finds no device and falls back to sockets, as with a wrong NCCL_IB_HCA:
a test turns it on a node without a new deployment.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from standin_engine.launch_config import LaunchConfig

SOCKET_FALLBACK_FILE = "STANDIN_NCCL_SOCKET_FILE"
DEFAULT_SOCKET_FALLBACK_FILE = "~/.cache/standin-nccl-socket"
DEVICE_NAMES_FILE = "STANDIN_RDMA_DEVICES_FILE"
DEFAULT_DEVICE_NAMES_FILE = "~/.cache/standin-rdma-devices"
NCCL_VERSION = "2.27.7+cuda13.0"
CHANNELS = 2


def device_names(environ: Mapping[str, str]) -> dict[str, str]:
    """uverbsN -> its RDMA device's name, as the node's sysfs maps them (the DEVICE_NAMES_FILE's lines)."""
    path = os.path.expanduser(environ.get(DEVICE_NAMES_FILE) or DEFAULT_DEVICE_NAMES_FILE)
    try:
        with open(path) as f:
            pairs = [line.split() for line in f]
    except OSError:
        return {}
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def selected(devices: list[str], hca: str) -> list[str]:
    """The devices NCCL_IB_HCA selects, in the devices' order (NCCL's: `^` excludes, `=` matches whole names, a bare
    name is a prefix; a `:port` suffix names the port)."""
    entries = [e.strip() for e in hca.split(",") if e.strip()]
    if not entries:
        return devices
    exclude = entries[0].startswith("^")
    exact = entries[0].lstrip("^").startswith("=")
    names = [e.lstrip("^=").split(":")[0] for e in entries]

    def matches(device: str) -> bool:
        return any(device == n if exact else device.startswith(n) for n in names)

    return [d for d in devices if matches(d) != exclude]


def ib_devices(environ: Mapping[str, str], dev_dir: str = "/dev/infiniband") -> tuple[list[str], str]:
    """The RDMA devices this rank's NCCL would open ([] when it finds none), and why none when so."""
    fallback = os.path.expanduser(environ.get(SOCKET_FALLBACK_FILE) or DEFAULT_SOCKET_FALLBACK_FILE)
    if os.path.exists(fallback):
        return [], f"{fallback} exists (the stand-in's socket-fallback knob)"
    try:
        verbs = sorted(v for v in os.listdir(dev_dir) if v.startswith("uverbs") and v[6:].isdigit())
    except OSError:
        verbs = []
    if not verbs:
        return [], f"{dev_dir} has no uverbs device in this container"
    names = device_names(environ)
    found = [names[v] for v in sorted(verbs, key=lambda v: int(v[6:])) if v in names]
    if not found:
        return [], f"no RDMA device is named for {dev_dir}'s {' '.join(verbs)} (`sim/sim roce on` names them)"
    opened = selected(found, environ.get("NCCL_IB_HCA", ""))
    if not opened:
        return [], f"NCCL_IB_HCA={environ['NCCL_IB_HCA']} selects none of this container's {', '.join(found)}"
    return opened, ""


def nccl_lines(
    config: LaunchConfig, environ: Mapping[str, str], dev_dir: str = "/dev/infiniband"
) -> tuple[list[str], str]:
    """This rank's NCCL lines for one communicator over the whole group (none without NCCL_DEBUG=INFO), and why
    it found no RDMA device ("" when it did)."""
    if environ.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE") or config.nnodes < 2:
        return [], ""
    prefix = f"{socket.gethostname()}:{os.getpid()}:{os.getpid()} [0] NCCL INFO "
    ifname = (environ.get("NCCL_SOCKET_IFNAME") or "eth0").split(",")[0].lstrip("=^")
    address = environ.get("SGLANG_HOST_IP") or environ.get("VLLM_HOST_IP") or config.host
    devices, why = ib_devices(environ, dev_dir)
    lines = [f"NCCL version {NCCL_VERSION}"]
    if devices:
        using = "".join(f" [{i}]{name}:1/RoCE" for i, name in enumerate(devices))
        lines.append(f"NET/IB : Using{using} [RO]; OOB {ifname}:{address}<0>")
        network = "IB"
    else:
        lines += ["NET/IB : No device found.", f"NET/Socket : Using [0]{ifname}:{address}<0>"]
        network = "Socket"
    lines.append(f"Using network {network}")
    world, rank = config.nnodes, config.node_rank
    for channel in range(CHANNELS):
        net = f"NET/{network}/{channel % max(len(devices), 1)}"
        lines.append(f"Channel {channel:02d}/0 : {rank}[0] -> {(rank + 1) % world}[0] [send] via {net}")
        lines.append(f"Channel {channel:02d}/0 : {(rank - 1) % world}[0] -> {rank}[0] [receive] via {net}")
    return [prefix + line for line in lines], why
