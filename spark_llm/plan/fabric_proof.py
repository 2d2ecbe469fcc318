"""Pure: the fabric proof. What each rank's NCCL says it chose, read from its own log, against what the stack asked.

NCCL prints, with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=INIT,NET (spark_llm.plan.engines.common.fabric_env sets them
when spark-llm:network.roceDevices is set), each line as `host:pid:tid [dev] NCCL INFO <text>` (src/debug.cc):
- `NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>`
  (src/transport/net_ib/init.cc) or, without a usable device, `NET/IB : No device found.`;
- `NET/Socket : Using [0]enp1s0f1np1:192.168.100.16<0>` (src/transport/net_socket.cc);
- `Using network IB` / `Using network Socket` per communicator (src/init.cc); NGC images with the HPC-X plugin say
  `IBext_v10` there and in the channels;
- `Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0` per channel (src/transport/net.cc).
A wrong NCCL_IB_HCA, a container without /dev/infiniband or a low memlock make NCCL fall back to sockets quietly:
the model serves at a fraction of the link's speed. The readiness gate (spark_llm.remote.readiness) reads the lines
after rank 0 served and fails the start on a fallback (or warns: spark-llm:network.fabricProof).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from spark_llm.group.history import FabricRecord
from spark_llm.group.logs import logs_command

# The lines the proof reads, and the NCCL and vLLM version lines the host record reads (one pass over the log).
_GREP = r"NCCL INFO (NET/|Using network |Channel .* via NET/)|NCCL version [0-9]|vLLM is using nccl=="
_IB_USING = re.compile(r"NCCL INFO NET/IB(?:ext\w*)? : Using((?: \[\d+\][^\s;]+)+)")
_DEVICE = re.compile(r"\[\d+\]([^\s:;]+):\d+")
_SOCKET_USING = re.compile(r"NCCL INFO NET/Socket : Using((?: \[\d+\]\S+)+)")
_NO_DEVICE = "NET/IB : No device found."
_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_CHANNEL = re.compile(r"via NET/(\w+)/\d+")
# Ray relays every actor's lines into the driver's log, tagged with the actor's node address.
_RAY_IP = re.compile(r"\bip=(\d+\.\d+\.\d+\.\d+)")

LINES_KEPT = 400
"""NCCL lines read per node: INIT,NET prints a few dozen per communicator."""


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

    @property
    def transport(self) -> str:
        """`Using network` and the channels decide (NCCL may print both plugins' `Using` lines); else the lines."""
        chosen = (*self.networks, *self.channels)
        if "Socket" in chosen:
            return "Socket"
        if any(name.startswith("IB") for name in chosen) or self.ib_devices:
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
        return ""


def nccl_lines_command(container: str) -> str:
    """Read-only bash on a node: its engine's NCCL transport and version lines, and vLLM's NCCL line (the last
    LINES_KEPT; nothing when the container is gone)."""
    return f"{logs_command(container)} | {{ grep -aE {shlex.quote(_GREP)} || true; }} | tail -n {LINES_KEPT}\n"


def _empty() -> dict:
    return {"ib": (), "ib_line": "", "sock": "", "none": False, "nets": [], "ch": []}


def rank_transports(logs: dict[str, str], addresses: dict[str, str]) -> dict[str, RankTransport]:
    """Each node's transport from the NCCL lines of every node's log (`addresses`: node -> fabric address, for the
    lines Ray relays into the head's log tagged `ip=ADDR`, which are the tagged node's)."""
    by_address = {addr: node for node, addr in addresses.items() if addr}
    found: dict[str, dict] = {}
    for source, text in logs.items():
        found.setdefault(source, _empty())
        for line in text.splitlines():
            tag = _RAY_IP.search(line)
            node = by_address.get(tag.group(1), source) if tag else source
            seen = found.setdefault(node, _empty())
            if m := _IB_USING.search(line):
                seen["ib"] = tuple(_DEVICE.findall(m.group(1)))
                seen["ib_line"] = line[line.index("NET/") :].strip()
            elif m := _SOCKET_USING.search(line):
                seen["sock"] = line[line.index("NET/") :].strip()
            elif _NO_DEVICE in line:
                seen["none"] = True
            elif m := _NETWORK.search(line):
                seen["nets"].append(m.group(1))
            elif m := _CHANNEL.search(line):
                seen["ch"].append(m.group(1))
    return {
        node: RankTransport(
            node,
            ib_devices=s["ib"],
            socket_line=s["sock"],
            ib_line=s["ib_line"],
            no_device=s["none"],
            networks=tuple(dict.fromkeys(s["nets"])),
            channels=tuple(dict.fromkeys(s["ch"])),
        )
        for node, s in found.items()
    }


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
    return "unknown (no NCCL network line in its log)"


def fabric_outputs(records: dict[str, FabricRecord]) -> dict[str, str]:
    """The `fabric_transport` stack output: node -> transport summary."""
    return {node: transport_summary(record) for node, record in sorted(records.items())}


# What a node says about the usual causes of a fallback, one `key<TAB>value` line each (read-only).
_CAUSES_SCRIPT = r"""c=$1
printf 'sys_devices\t%s\n' "$(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"
printf 'container_devices\t%s\n' "$(docker exec "$c" ls /dev/infiniband 2>/dev/null | tr '\n' ' ')"
pid=$(docker inspect -f '{{.State.Pid}}' "$c" 2>/dev/null || true)
printf 'memlock\t%s\n' "$(awk '/^Max locked memory/ {print $4}' "/proc/$pid/limits" 2>/dev/null)"
printf 'env\t%s\n' "$(docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$c" 2>/dev/null \
  | grep -E '^NCCL_(IB_HCA|IB_GID_INDEX|IB_DISABLE|NET|SOCKET_IFNAME)=' | tr '\n' ' ')"
"""


def causes_command(container: str) -> str:
    """Read-only bash on a node whose rank fell back: what `fallback_causes` weighs."""
    return f"bash -s -- {shlex.quote(container)} <<'SPARK_LLM_CAUSES'\n{_CAUSES_SCRIPT}SPARK_LLM_CAUSES\n"


def fallback_causes(node: str, text: str, expected: tuple[str, ...]) -> list[str]:
    """The likely causes of a fallback on `node`, from what `causes_command` printed, most likely first."""
    facts = dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)
    env = dict(item.split("=", 1) for item in facts.get("env", "").split() if "=" in item)
    listed = facts.get("sys_devices", "").split()
    causes = []
    unknown = [d for d in expected if d not in listed]
    if unknown:
        causes.append(
            f"NCCL_IB_HCA names {','.join(unknown)}, which {node}'s /sys/class/infiniband does not list (it lists"
            f" {', '.join(listed) or 'no RDMA device'}): set spark-llm:network.roceDevices to the devices"
            " `ibdev2netdev` shows Up"
        )
    if not facts.get("container_devices", "").split():
        causes.append("the engine's container has no /dev/infiniband (not mounted from the node)")
    memlock = facts.get("memlock", "").strip()
    if memlock and memlock != "unlimited":
        causes.append(
            f"the container's memlock limit is {memlock} bytes, not unlimited (RDMA registration fails:"
            " spark-llm:network.memlockBytes -1)"
        )
    if env.get("NCCL_IB_DISABLE", "0") not in ("", "0") or env.get("NCCL_NET", "").lower() == "socket":
        causes.append("the engine's environment turns IB off (NCCL_IB_DISABLE or NCCL_NET)")
    gid = env.get("NCCL_IB_GID_INDEX")
    causes.append(
        f"else: the RoCE GID index ({f'NCCL_IB_GID_INDEX={gid}' if gid else 'NCCL_IB_GID_INDEX unset: NCCL picks one'})"
        f" or NCCL_SOCKET_IFNAME={env.get('NCCL_SOCKET_IFNAME', '(unset)')} (the OOB interface must be the fabric's)"
    )
    return causes


def fallback_message(node: str, role: str, record: FabricRecord, causes: list[str]) -> str:
    """What the gate says of one rank whose transport is not what the stack asked."""
    lines = [f"{node} ({role}): {record.get('problem')}."]
    lines += [f"  likely cause: {cause}" for cause in causes]
    return "\n".join(lines)
