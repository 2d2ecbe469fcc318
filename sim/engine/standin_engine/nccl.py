"""NCCL's INIT,NET lines, as a rank prints them with NCCL_DEBUG=INFO during its distributed init.

The shapes are NVIDIA/nccl's (2.27-2.30): each line `host:pid:tid [dev] NCCL INFO <text>` (src/debug.cc);
`NET/IB : Using [0]dev:1/RoCE ... [RO]; OOB if:addr<0>` (src/transport/net_ib/init.cc), or `NET/IB : No device
found.` and `NET/Socket : Using [0]if:addr<0>` (src/transport/net_socket.cc); `Using network IB|Socket`
(src/init.cc); `Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0` (src/transport/net.cc).

RoCE is "found" as NCCL finds it on a Spark: the container has /dev/infiniband (what the product mounts with
spark-llm:network.roceDevices) and NCCL_IB_HCA names devices. The knob: while the file SOCKET_FALLBACK_FILE names
(default ~/.cache/standin-nccl-socket, the node's cache dir) exists, the rank finds no device and falls back to
sockets, as with a wrong NCCL_IB_HCA: a test turns it on a node without a new deployment.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from standin_engine.launch_config import LaunchConfig

SOCKET_FALLBACK_FILE = "STANDIN_NCCL_SOCKET_FILE"
DEFAULT_SOCKET_FALLBACK_FILE = "~/.cache/standin-nccl-socket"
NCCL_VERSION = "2.27.7+cuda13.0"
CHANNELS = 2


def ib_devices(environ: Mapping[str, str], dev_dir: str = "/dev/infiniband") -> tuple[list[str], str]:
    """The RDMA devices this rank's NCCL would use ([] when it finds none), and why none when so."""
    fallback = os.path.expanduser(environ.get(SOCKET_FALLBACK_FILE) or DEFAULT_SOCKET_FALLBACK_FILE)
    if os.path.exists(fallback):
        return [], f"{fallback} exists (the stand-in's socket-fallback knob)"
    try:
        verbs = os.listdir(dev_dir)
    except OSError:
        verbs = []
    if not verbs:
        return [], f"{dev_dir} is missing or empty in this container"
    wanted = [name.lstrip("=^") for name in environ.get("NCCL_IB_HCA", "").split(",") if name.strip()]
    if not wanted:
        return [], "NCCL_IB_HCA is not set"
    return [name.split(":")[0] for name in wanted], ""


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
