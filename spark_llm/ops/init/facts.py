"""Pure: what `spark-llm init` read on one node (scripts/lib/discover.sh's sections), as facts with their sources.

Each fact keeps where it came from (`source`): the stack file init writes says it beside the value, so a reviewer
can check it on the node with the same command.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field

from spark_llm.ops.sections import Section

GIB = 1024**3


@dataclass(frozen=True)
class RocePort:
    """One RoCE device's port 1: its state and the netdev(s) it runs over (/sys/class/infiniband)."""

    device: str
    state: str
    netdevs: tuple[str, ...]

    @property
    def active(self) -> bool:
        return self.state.split(":")[-1].strip() == "ACTIVE"


@dataclass(frozen=True)
class Interface:
    name: str
    mtu: int | None
    networks: tuple[ipaddress.IPv4Interface, ...]


@dataclass(frozen=True)
class NodeFacts:
    """One node as init found it. `address`: how it was reached (from the operator, or from the head)."""

    address: str
    hostname: str
    arch: str
    mem_total: int | None
    roce: tuple[RocePort, ...]
    interfaces: dict[str, Interface]
    default_route_dev: str | None
    gpus: tuple[str, ...]
    disk_free: int | None
    disk_mount: str | None
    runtimes: tuple[str, ...] | None
    image_id: str | None
    home: str = ""
    unread: tuple[str, ...] = field(default=())  # sections that did not answer, named in the summary

    @property
    def fabric_devices(self) -> list[RocePort]:
        """The ACTIVE RoCE ports that run over a netdev with an IPv4 address: the fabric candidates."""
        return [p for p in self.roce if p.active and any(self.interfaces.get(n, _NONE).networks for n in p.netdevs)]

    @property
    def fabric_interface(self) -> str | None:
        found = self.fabric_devices
        return next((n for n in found[0].netdevs if self.interfaces.get(n, _NONE).networks), None) if found else None

    def twins(self, netdev: str) -> list[str]:
        """Every ACTIVE RoCE device of the port `netdev` is on, sorted: a Spark shows one cable as two devices on two
        PCI domains (rocep1s0f1 over enp1s0f1np1, roceP2p1s0f1 over enP2p1s0f1np1), the second often without an
        address of its own."""
        ports = {port_key(p.device) for p in self.roce if p.active and netdev in p.netdevs}
        return sorted((p.device for p in self.roce if p.active and port_key(p.device) in ports), key=str.lower)

    def address_on(self, netdev: str) -> ipaddress.IPv4Interface | None:
        networks = self.interfaces.get(netdev, _NONE).networks
        return networks[0] if networks else None

    @property
    def management_interface(self) -> str | None:
        """The interface holding the address init reached the node at (the head's, from the operator), else the
        default route's (a worker, reached through the head over the fabric)."""
        for iface in self.interfaces.values():
            if any(str(n.ip) == self.address for n in iface.networks) and iface.name != self.fabric_interface:
                return iface.name
        return self.default_route_dev

    @property
    def nvidia_runtime(self) -> bool:
        return self.runtimes is not None and "nvidia" in self.runtimes


_NONE = Interface("", None, ())


def port_key(device: str) -> str:
    """Pure: the PCI bus/slot/function a RoCE device sits on, without its domain: `rocep1s0f1` and `roceP2p1s0f1`
    (the prefix's case is the system's) are one port's twins, both "p1s0f1"."""
    found = re.match(r"roce(?:[Pp]\d+(?=p))?(.*)$", device)
    return (found.group(1) if found else device).lower()


def parse(address: str, sections: dict[str, Section]) -> NodeFacts:
    """Pure: the discovery script's sections of one node."""
    unread = tuple(
        name for name in ("hostname", "arch", "meminfo", "addrs", "links", "disk") if not sections.get(name, _BAD).ok
    )
    return NodeFacts(
        address=address,
        hostname=_text(sections, "hostname"),
        arch=_text(sections, "arch"),
        mem_total=_mem_total(sections),
        roce=_roce(sections),
        interfaces=_interfaces(sections),
        default_route_dev=_default_dev(sections),
        gpus=tuple(line.strip() for line in _lines(sections, "gpu")),
        disk_free=_disk(sections)[0],
        disk_mount=_disk(sections)[1],
        runtimes=_runtimes(sections),
        image_id=_text(sections, "image") or None,
        home=_text(sections, "home"),
        unread=unread,
    )


_BAD = Section(-1, "")


def _lines(sections: dict[str, Section], name: str) -> list[str]:
    section = sections.get(name, _BAD)
    return [line for line in section.body.splitlines() if line.strip()] if section.ok else []


def _text(sections: dict[str, Section], name: str) -> str:
    lines = _lines(sections, name)
    return lines[0].strip() if lines else ""


def _mem_total(sections: dict[str, Section]) -> int | None:
    for line in _lines(sections, "meminfo"):
        found = re.match(r"MemTotal:\s+(\d+)\s+kB", line)
        if found:
            return int(found.group(1)) * 1024
    return None


def _roce(sections: dict[str, Section]) -> tuple[RocePort, ...]:
    ports = []
    for line in _lines(sections, "roce"):
        device, _, rest = line.partition("|")
        state, _, nets = rest.partition("|")
        ports.append(RocePort(device.strip(), state.strip(), tuple(nets.split())))
    if not ports:
        # No sysfs view (a container without /sys/class/infiniband, say): Mellanox's `ibdev2netdev`, where present,
        # says "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)"; its Up is the netdev's link, the nearest it says to ACTIVE.
        for line in _lines(sections, "ibdev2netdev"):
            found = re.match(r"(\S+) port 1 ==> (\S+) \((\w+)\)", line.strip())
            if found:
                state = "4: ACTIVE" if found.group(3) == "Up" else f"1: {found.group(3).upper()}"
                ports.append(RocePort(found.group(1), state, (found.group(2),)))
    return tuple(ports)


def _interfaces(sections: dict[str, Section]) -> dict[str, Interface]:
    mtus: dict[str, int] = {}
    for line in _lines(sections, "links"):
        # "2140: eth0@if2141: <BROADCAST,...> mtu 1500 qdisc ..." (the @peer is a veth's, not the name)
        found = re.match(r"\d+:\s+([^:@\s]+)(?:@\S+)?:.*\smtu\s+(\d+)", line)
        if found:
            mtus[found.group(1)] = int(found.group(2))
    networks: dict[str, list[ipaddress.IPv4Interface]] = {}
    for line in _lines(sections, "addrs"):
        # "2140: eth0    inet 172.29.2.10/24 brd ... scope global eth0"
        found = re.match(r"\d+:\s+(\S+)\s+inet\s+(\S+)", line)
        if found:
            try:
                networks.setdefault(found.group(1), []).append(ipaddress.IPv4Interface(found.group(2)))
            except ValueError:
                continue
    names = set(mtus) | set(networks)
    return {n: Interface(n, mtus.get(n), tuple(networks.get(n, []))) for n in sorted(names)}


def _default_dev(sections: dict[str, Section]) -> str | None:
    for line in _lines(sections, "route"):
        found = re.search(r"\bdev\s+(\S+)", line)
        if found:
            return found.group(1)
    return None


def _disk(sections: dict[str, Section]) -> tuple[int | None, str | None]:
    lines = _lines(sections, "disk")
    fields = lines[-1].split() if lines else []
    # "Filesystem 1-blocks Used Available Capacity Mounted-on"
    if len(fields) >= 6 and fields[3].isdigit():
        return int(fields[3]), fields[5]
    return None, None


def _runtimes(sections: dict[str, Section]) -> tuple[str, ...] | None:
    text = _text(sections, "docker")
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return tuple(sorted(found)) if isinstance(found, dict) else None
