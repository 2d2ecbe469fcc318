"""`sim link`: cap (or uncap) the egress of the nodes' fabric interfaces, as slower cables would."""

from __future__ import annotations

from collections.abc import Sequence

from host import SimError, docker
from paths import SimPaths
from state import ClusterState


def fabric_interface(container: str, address: str) -> str:
    """The node's interface that holds its fabric address."""
    out = docker("exec", container, "ip", "-o", "-4", "addr", "show", "to", address).split()
    if len(out) < 2:
        raise SimError(f"{container} has no interface with {address}")
    return out[1]


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
        print(f"{node.name} {dev}: " + (f"egress capped at {rate_mbit} Mbit/s" if rate_mbit else "uncapped"))
