"""Pure: what each rank's NCCL says it chose, read from its own log lines, against what the stack asked. The
readiness gate (spark_llm.remote.fabric_proof) and the supervisor's own restarts (scripts/supervisor.py, which ships
this room) read them with this one reader; where the lines come from and what a fallback's causes are is
spark_llm.plan.fabric_proof's.

NCCL prints, with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET, each line as `host:pid:tid [dev] NCCL INFO <text>`
(src/debug.cc). The shapes, NCCL 2.18 to 2.30 (tests/unit/plan/test_fabric_proof.py cites each version's source line):
- `NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>`, once a
  process; 2.20-2.23 print NICs merged into one net device as `[0]={[0] rocep1s0f0:1/RoCE, [1] roceP2p1s0f0:1/RoCE}`,
  2.24+ list the physical ones and say `NET/IB : Made virtual device [2] name=rocep1s0f0+roceP2p1s0f0 ...` for a
  merge; 2.30 may add `:rail` and `:plane` after the port. Without a usable device `NET/IB : No device found.`
  (2.24+ then print an empty `NET/IB : Using [RO]; OOB ...` too);
- `NET/Socket : Using [0]enp1s0f1np1:192.168.100.16<0>`;
- `Using network IB` per communicator: the network's name, which may hold spaces (2.28+ keep a v10 plugin's own
  name: `Using network NCCL RDMA Plugin v10`); NGC images with the HPC-X plugin say `IBext_v10`;
- `Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA` per channel: the network's name and the net device's index,
  the place of its entry in the `Using` list (or a virtual device's number).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from spark_llm.group.history import FabricRecord

# The devices: between `Using` and ` [RO]; OOB` (`Using%s %s; OOB %s:%s`; an empty list when no device was found),
# or the end of a line cut at NCCL's 1024-byte line buffer (src/debug.cc).
_IB_USING = re.compile(r"NCCL INFO NET/IB(?:ext\w*)? : Using(.*?)(?: (?:\[RO\])?; OOB |$)")
# One net device of that list: `[0]name:port...` or, 2.20-2.23, `[0]={[0] name:port/RoCE, [1] name:port/RoCE}`.
_NIC = re.compile(r"\[\d+\](?:=\{(?P<merged>[^}]*)(?:\}|$)|(?P<name>[^\s:;=]+):\d+)")
_MERGED_MEMBER = re.compile(r"\[\d+\] ([^\s:;,]+):\d+")
_VIRTUAL = re.compile(r"NCCL INFO NET/IB(?:ext\w*)? : Made virtual device \[(\d+)\] name=(\S+)")
_SOCKET_USING = re.compile(r"NCCL INFO NET/Socket : Using((?: \[\d+\]\S+)+)")
_NO_DEVICE = "NET/IB : No device found."
_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
# `via NET/%s/%d%s%s%s`: the name may hold spaces and ends at the last `/index` before the flags (`/GDRDMA`,
# `(PCI)`, `/Shared`) or the proxy rank's `(%d)`.
_CHANNEL = re.compile(r"via NET/(.+?)/(\d+)(?:\(\d+\))?(?:[/(][^/]*)*\s*$")
# Ray relays every actor's lines into the driver's log, tagged with the actor's node address.
_RAY_IP = re.compile(r"\bip=(\d+\.\d+\.\d+\.\d+)")


def network_kind(name: str) -> str:
    """`IB` or `Socket` by what a network's name says (`IB`, `IBext_v10`, `NCCL RDMA Plugin v10`, `UCX`: RDMA);
    "" for a plugin this reader cannot place."""
    lowered = name.lower()
    if "socket" in lowered:
        return "Socket"
    if lowered.startswith(("ib", "ucx")) or "rdma" in lowered:
        return "IB"
    return ""


@dataclass(frozen=True)
class RankTransport:
    """What one rank's NCCL lines say."""

    node: str
    ib_devices: tuple[str, ...] = ()
    socket_line: str = ""
    ib_line: str = ""
    no_device: bool = False
    networks: tuple[str, ...] = ()
    channels: tuple[str, ...] = ()
    channel_devices: tuple[str, ...] | None = None
    """The RDMA devices the RDMA channels run over; None without such channels or where an index names no entry."""

    @property
    def transport(self) -> str:
        """`Using network` and the channels decide (NCCL may print both plugins' `Using` lines); else the lines."""
        kinds = [network_kind(name) for name in (*self.networks, *self.channels)]
        if "Socket" in kinds:
            return "Socket"
        if "IB" in kinds:
            return "IB"
        if kinds:
            # A plugin this reader cannot place (e.g. `AWS Libfabric`): say so rather than guess from the lines.
            return "unknown"
        if self.ib_devices:
            return "IB"
        return "Socket" if self.socket_line or self.no_device else "unknown"

    def record(self, expected: tuple[str, ...]) -> FabricRecord:
        transport = self.transport
        network = self.networks[-1] if self.networks else (self.channels[-1] if self.channels else "")
        line = self.ib_line if transport == "IB" else self.socket_line or (_NO_DEVICE if self.no_device else "")
        return {
            "transport": transport,
            "network": network,
            "devices": list(self.ib_devices),
            "line": line,
            "problem": self.problem(expected),
        }

    def problem(self, expected: tuple[str, ...]) -> str:
        transport = self.transport
        if transport == "Socket":
            said = "NET/IB : No device found., then " if self.no_device else ""
            chose = self.socket_line or "Using network Socket"
            return f"NCCL fell back to sockets ({said}{chose}) instead of RoCE over {','.join(expected)}"
        if transport == "IB":
            missing = [d for d in expected if d not in self.ib_devices]
            if missing:
                return (
                    f"NCCL uses {','.join(self.ib_devices)} but not {','.join(missing)} (half the link's lanes"
                    " when a RoCE twin is missing)"
                )
            # Listed is not used: channels all on one twin leave the other idle.
            used = self.channel_devices
            idle = [d for d in expected if used and d not in used]
            if used and idle:
                return (
                    f"NCCL's channels all run over {','.join(used)}, none over {','.join(idle)}"
                    " (half the link's lanes when a RoCE twin carries none)"
                )
        return ""


@dataclass
class _Lines:
    """One node's lines as read so far (the last `Using` line of each kind wins)."""

    nics: list[tuple[str, ...]] = field(default_factory=list)
    virtual: dict[int, tuple[str, ...]] = field(default_factory=dict)
    ib_line: str = ""
    socket_line: str = ""
    no_device: bool = False
    networks: list[str] = field(default_factory=list)
    channels: list[tuple[str, int]] = field(default_factory=list)

    def take(self, line: str) -> None:
        if m := _IB_USING.search(line):
            self.nics = [
                tuple(_MERGED_MEMBER.findall(nic["merged"])) if nic["merged"] is not None else (nic["name"],)
                for nic in _NIC.finditer(m.group(1))
            ]
            self.ib_line = line[line.index("NET/") :].strip()
        elif m := _VIRTUAL.search(line):
            self.virtual[int(m.group(1))] = tuple(m.group(2).split("+"))
        elif m := _SOCKET_USING.search(line):
            self.socket_line = line[line.index("NET/") :].strip()
        elif _NO_DEVICE in line:
            self.no_device = True
        elif m := _NETWORK.search(line):
            self.networks.append(m.group(1))
        elif m := _CHANNEL.search(line):
            self.channels.append((m.group(1), int(m.group(2))))

    def channel_devices(self) -> tuple[str, ...] | None:
        """The devices the RDMA channels' indices name (a virtual device's own members where NCCL made one)."""
        indices = {index for name, index in self.channels if network_kind(name) == "IB"}
        devices: list[str] = []
        for index in sorted(indices):
            nic = self.virtual.get(index) or (self.nics[index] if index < len(self.nics) else None)
            if nic is None:
                return None
            devices += nic
        return tuple(dict.fromkeys(devices)) if devices else None

    def rank(self, node: str) -> RankTransport:
        return RankTransport(
            node,
            ib_devices=tuple(dict.fromkeys(device for nic in self.nics for device in nic)),
            socket_line=self.socket_line,
            ib_line=self.ib_line,
            no_device=self.no_device,
            networks=tuple(dict.fromkeys(self.networks)),
            channels=tuple(dict.fromkeys(name for name, _ in self.channels)),
            channel_devices=self.channel_devices(),
        )


def rank_transports(logs: dict[str, str], addresses: dict[str, str]) -> dict[str, RankTransport]:
    """Each node's transport from the NCCL lines of every node's log (`addresses`: node -> fabric address, for the
    lines Ray relays into the head's log tagged `ip=ADDR`, which are the tagged node's)."""
    by_address = {addr: node for node, addr in addresses.items() if addr}
    found: dict[str, _Lines] = {}
    for source, text in logs.items():
        found.setdefault(source, _Lines())
        for line in text.splitlines():
            tag = _RAY_IP.search(line)
            node = by_address.get(tag.group(1), source) if tag else source
            found.setdefault(node, _Lines()).take(line)
    return {node: lines.rank(node) for node, lines in found.items()}


def fabric_records(
    logs: dict[str, str], addresses: dict[str, str], expected: tuple[str, ...]
) -> dict[str, FabricRecord]:
    """The proof per node, as the start records it."""
    return {node: rank.record(expected) for node, rank in rank_transports(logs, addresses).items()}


def transport_summary(record: FabricRecord) -> str:
    """One rank's transport in a few words: `NET/IB rocep1s0f0,roceP2p1s0f0` or `NET/Socket eth0`."""
    transport = record.get("transport", "unknown")
    if transport == "IB":
        return f"NET/{record.get('network') or 'IB'} {','.join(record.get('devices', []))}".rstrip()
    if transport == "Socket":
        line = record.get("line", "")
        devices = re.findall(r"\[\d+\]([^:\s]+):", line) if line.startswith("NET/Socket") else []
        return f"NET/Socket {','.join(devices)}".rstrip()
    network = record.get("network")
    return f"unknown (NCCL's network {network})" if network else "unknown (no NCCL network line in its log)"


def fabric_outputs(records: dict[str, FabricRecord]) -> dict[str, str]:
    """The `fabric_transport` stack output: node -> transport summary."""
    return {node: transport_summary(record) for node, record in sorted(records.items())}
