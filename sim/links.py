"""`sim link`: cap (or uncap) the egress of the nodes' fabric interfaces, as slower cables would."""

from __future__ import annotations

from collections.abc import Sequence

from host import SimError, docker, run
from paths import SimPaths
from state import ClusterState


def fabric_interface(container: str, address: str) -> str:
    """The node's interface that holds its fabric address."""
    out = docker("exec", container, "ip", "-o", "-4", "addr", "show", "to", address).split()
    if len(out) < 2:
        raise SimError(f"{container} has no interface with {address}")
    return out[1]


# The speed the capped link reports where a real link's driver does (/sys/class/net/IF/speed, Mbit/s): a file bind
# mounted over it in the node, so what reads it (`spark-llm preflight --bandwidth`) reads the cap. A veth says
# 10000 on its own. The file is on the node's /run, a tmpfs: a restarted node forgets it with the tc cap.
SPEED_FILE = "/run/spark-llm-sim-link-speed"


def set_speed(container: str, dev: str, rate_mbit: int | None) -> None:
    """Report `rate_mbit` as the interface's speed, or (None) the kernel's own figure again."""
    speed = f"/sys/class/net/{dev}/speed"
    # Every mount of an earlier `sim link` (one a call: a cap set twice is mounted twice); bounded all the same.
    for _ in range(16):
        if run(["docker", "exec", container, "umount", speed], check=False).returncode != 0:
            break
    if rate_mbit is not None:
        docker("exec", container, "sh", "-c", f"echo {int(rate_mbit)} > {SPEED_FILE}")
        docker("exec", container, "mount", "--bind", "-o", "ro", SPEED_FILE, speed)


def link(paths: SimPaths, rate_mbit: int | None, nodes: Sequence[str] = ()) -> None:
    """Cap (rate_mbit) or uncap (None) the egress of each node's fabric interface with `tc tbf`.

    The sim's links are one host's bridge: a cap per sending interface makes link-bound effects (a head's uplink
    shared by several copies) show as they would on real cables.
    """
    state = ClusterState.load(paths.state_file)
    if state is None or not state.nodes:
        raise SimError(f"no sim cluster recorded in {paths.state_dir} (run: sim/sim up)")
    for node in state.nodes:
        if nodes and node.name not in nodes:
            continue
        dev = fabric_interface(node.container, node.fabric_address)
        docker("exec", node.container, "tc", "qdisc", "del", "dev", dev, "root", check=False)
        if rate_mbit is not None:
            # burst: 10 ms at this rate, and never below 256 KiB: a veth hands tbf 64 KiB GSO segments, and a
            # bucket smaller than a few of them makes tbf split each one in software, which costs more CPU than
            # the copy it shapes (measured: rsync's CPU x3 at 400 Mbit/s with a 50 KiB burst).
            burst = max(256 << 10, rate_mbit * 1_000_000 // 8 // 100)
            docker(
                "exec", node.container, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                "rate", f"{rate_mbit}mbit", "burst", str(burst), "latency", "100ms",
            )  # fmt: skip
        set_speed(node.container, dev, rate_mbit)
        print(f"{node.name} {dev}: " + (f"egress capped at {rate_mbit} Mbit/s" if rate_mbit else "uncapped"))
