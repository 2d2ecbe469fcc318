"""Pure: what `spark-llm init` checks in what it found, each problem named with its fix, before it writes a file.

A problem stops init (nothing is written): the classic NCCL hang or silent socket fallback starts from one of these.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_llm.ops.init.facts import NodeFacts


@dataclass(frozen=True)
class Reach:
    """The head's ping of a worker's fabric address over the head's fabric interface, with the fabric MTU (DF set)."""

    worker: str
    address: str
    answered: bool
    detail: str = ""


def problems(
    nodes: dict[str, NodeFacts], reaches: list[Reach], *, gpus: bool, image: str = "", image_on: str = ""
) -> list[str]:
    """Every problem in `nodes` (name -> facts, the head first) and the head's pings, one line each with its fix.
    `image_on`: where `image` must be before `up`: "head" (mode transfer from the head), "every node" (present)."""
    found: list[str] = []
    needing = list(nodes.items())[: 1 if image_on == "head" else None] if image and image_on else []
    for name, facts in needing:
        if facts.image_id is None:
            why = "the head sends it to the workers" if image_on == "head" else "spark-llm:image.mode is present"
            found.append(
                f"{name} ({facts.address}): the image {image} is not there, and {why}: `docker pull {image}` there"
                " first (or set spark-llm:image.mode pull)"
            )
    for name, facts in nodes.items():
        found += _node_problems(name, facts, gpus=gpus)
    mtus = {name: _fabric_mtu(facts) for name, facts in nodes.items() if facts.fabric_interface}
    if len(set(mtus.values())) > 1:
        shown = ", ".join(
            f"{name} {facts.fabric_interface} {mtus[name]}" for name, facts in nodes.items() if name in mtus
        )
        found.append(
            f"the fabric MTUs differ ({shown}): set the same MTU on both ends (9000 on a Spark's ConnectX-7,"
            " e.g. `nmcli connection modify IFACE 802-3-ethernet.mtu 9000`), or frames larger than the smaller one"
            " are dropped and NCCL hangs"
        )
    for reach in reaches:
        if not reach.answered:
            found.append(
                f"{reach.worker}'s fabric address {reach.address} does not answer the head over the fabric"
                f" ({reach.detail or 'no reply'}): check the cable and both ends' addresses are in one subnet"
            )
    return found


def _fabric_mtu(facts: NodeFacts) -> int | None:
    iface = facts.fabric_interface
    return facts.interfaces[iface].mtu if iface else None


def _node_problems(name: str, facts: NodeFacts, *, gpus: bool) -> list[str]:
    found: list[str] = []
    where = f"{name} ({facts.address})"
    if facts.unread:
        found.append(
            f"{where}: could not read {', '.join(facts.unread)}: run `spark-llm init` again, or read them by hand"
        )
    if not facts.fabric_interface:
        if not facts.roce:
            found.append(
                f"{where} shows no RoCE device (/sys/class/infiniband is empty): install the ConnectX-7 driver"
                " (MLNX_OFED / DGX OS's) or check the card, then run init again"
            )
        else:
            states = ", ".join(f"{p.device} {p.state.split(':')[-1].strip()} on {' '.join(p.netdevs) or '-'}"
                               for p in facts.roce)  # fmt: skip
            found.append(
                f"{where} has no ACTIVE RoCE port with an IPv4 address ({states}): connect the ConnectX-7 cable,"
                " bring the port up and give it an address (`ip addr add 192.168.100.1/24 dev IFACE`)"
            )
    found += _overlapping_subnets(where, facts)
    if gpus and not facts.gpus:
        found.append(
            f"{where}: nvidia-smi shows no GPU: install the NVIDIA driver (DGX OS has it) and check `nvidia-smi`"
        )
    if gpus and not facts.nvidia_runtime:
        shown = ", ".join(facts.runtimes) if facts.runtimes is not None else "docker did not answer"
        found.append(
            f"{where}: Docker has no NVIDIA runtime ({shown}): install nvidia-container-toolkit and run"
            " `nvidia-ctk runtime configure --runtime=docker && systemctl restart docker`"
        )
    return found


def _overlapping_subnets(where: str, facts: NodeFacts) -> list[str]:
    """Two interfaces with addresses in one subnet: the kernel routes the fabric's traffic out of either."""
    found: list[str] = []
    seen: list[tuple[str, object]] = []
    for iface in facts.interfaces.values():
        if iface.name == "lo":
            continue
        for network in iface.networks:
            for other_name, other in seen:
                if other_name != iface.name and network.network.overlaps(other.network):  # type: ignore[attr-defined]
                    found.append(
                        f"{where}: {other_name} ({other}) and {iface.name} ({network}) are in one subnet: the kernel"
                        " may send the fabric's traffic out of the wrong one; give the fabric port a subnet of its own"
                    )
            seen.append((iface.name, network))
    return found
