"""Is each node's fabric ready for a start? Judged from its host fields as read now: the one rule `pulumi preview`,
`up`, `spark-llm preflight` (through spark_llm.plan.fabric_ready) and the supervisor before each restart of its own
(scripts/supervisor.py) apply. Standard library only: it ships to the head beside the supervisor.

With spark-llm:network.roceDevices, NCCL opens only the named devices that exist with port 1 ACTIVE (and connects
over an address of theirs, a GID), and lists only those in its `NET/IB : Using` line: a named device that is missing
or down is no error to NCCL, which runs on the others or falls back to TCP sockets (`NET/IB : No device found.`) at
a fraction of the link's speed, found out only after the group was stopped and started again (and kept until the
next restart: a supervisor that restarted a group onto a port still coming up after a reboot kept it on sockets).
Docker refuses to create a container with `--device /dev/infiniband` on a node without it, also after the group
was stopped. And the fabric has one MTU, spark-llm:network.mtu, on every node: nodes set apart (9000 on one, 1500 on
the other) run the link at the smaller at best, and a packet larger than the smaller MTU is dropped, not carried; a
configured MTU that is not the nodes' makes every check at it (preflight's don't-fragment pings) judge another fabric
than the one that runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_llm.group.history import HostFields

ROCE_KEY = "spark-llm:network.roceDevices"
MTU_KEY = "spark-llm:network.mtu"
ACTIVE = "ACTIVE"
ABSENT = "absent"  # a host field that could not be read (spark_llm.plan.host_record's)
NOT_READ = "not read"
"""`verbs_devices` as a reader that cannot see the node's /dev says it (the supervisor on the head, in its container):
no fault is made of it (Docker's own start of the existing container then says it)."""

ExecOn = Callable[[str, Sequence[str]], str]
"""How a printed command runs `argv` on `node` (spark_llm.plan.node_commands.StackRef.exec_on)."""


@dataclass(frozen=True)
class FabricWant:
    """What the stack's config asks of every node's fabric."""

    roce_devices: tuple[str, ...]
    """spark-llm:network.roceDevices, as written (`rocep1s0f0:1`); () without RDMA."""
    interfaces: tuple[str, ...]
    """spark-llm:network.fabricInterfaces."""
    mtu: int
    """spark-llm:network.mtu."""


@dataclass(frozen=True)
class FabricFault:
    """One reason a node's fabric is not ready for a start."""

    node: str
    key: str
    """The config key it concerns (spark-llm:network.roceDevices, spark-llm:network.mtu)."""
    subject: str
    """The device or interface it is about (`rocep1s0f0`, `enp1s0f0np0`, `/dev/infiniband`)."""
    problem: str
    """What is wrong, naming the node and the key."""
    fix: str
    """What to do, in lower case (preflight's fix column; the program's refusal after a colon)."""

    def __str__(self) -> str:
        return f"{self.problem}: {self.fix}"


def device_name(entry: str) -> str:
    """A roceDevices entry without NCCL_IB_HCA's port suffix (`rocep1s0f0:1` -> `rocep1s0f0`)."""
    return entry.partition(":")[0]


def device_faults(want: FabricWant, node: str, fields: HostFields, exec_on: ExecOn) -> list[FabricFault]:
    """With roceDevices: the node's /dev/infiniband, and each named device there, ACTIVE, with an address."""
    if not want.roce_devices:
        return []
    faults = []
    if fields.get("verbs_devices", ABSENT) == ABSENT:  # NOT_READ: the reader cannot see the node's /dev
        faults.append(
            FabricFault(
                node,
                ROCE_KEY,
                "/dev/infiniband",
                f"{node} has no /dev/infiniband, which {ROCE_KEY} mounts into its engine container: Docker would"
                " refuse to create it (after the group was stopped)",
                "load the node's RDMA drivers (`ls /dev/infiniband` lists uverbs0, ...), or remove"
                f" {ROCE_KEY} to run NCCL over sockets",
            )
        )
    names = list(dict.fromkeys(device_name(entry) for entry in want.roce_devices))
    roce = fields.get("roce_devices", ABSENT)
    if roce == ABSENT:
        problem = (
            f"{ROCE_KEY} names {', '.join(names)}, and {node} has no RoCE device (/sys/class/infiniband lists none)"
        )
        fix = f"load the node's RDMA drivers (`ls /sys/class/infiniband` lists the devices), or remove {ROCE_KEY}"
        return [*faults, FabricFault(node, ROCE_KEY, "/sys/class/infiniband", problem, fix)]
    listed = roce.split()
    ibdev2netdev = f"`{exec_on(node, ['ibdev2netdev'])}` lists them with their state"
    for name in names:
        state = fields.get(f"port_state.{name}", ABSENT)
        if name not in listed:
            problem = (
                f"{ROCE_KEY} names {name}, which {node} does not have (its /sys/class/infiniband lists"
                f" {', '.join(listed)})"
            )
            fix = f"name {node}'s ACTIVE RoCE devices there, both twins of the cabled port ({ibdev2netdev})"
        elif state != ACTIVE:
            said = "in a state that cannot be read" if state == ABSENT else state
            problem = f"{node}'s RoCE device {name} ({ROCE_KEY}) is {said}, not ACTIVE: NCCL would not open it"
            fix = f"connect the cable of its port and bring the port up, or name the ACTIVE twins ({ibdev2netdev})"
        elif fields.get(f"gids.{name}", ABSENT) == ABSENT:
            problem = f"{node}'s RoCE device {name} ({ROCE_KEY}) is ACTIVE without an address (no GID on port 1)"
            fix = "give its network interface an address (`ip -o addr` there): its RoCE GIDs follow the interface's"
        else:
            continue
        faults.append(FabricFault(node, ROCE_KEY, name, problem, fix))
    return faults


def host_mtus(want: FabricWant, fields: HostFields) -> dict[str, int]:
    """The fabric interfaces' MTUs a node's host fields give (`mtu.IF`); an interface it lacks is not there."""
    found = {iface: fields.get(f"mtu.{iface}", ABSENT) for iface in want.interfaces}
    return {iface: int(mtu) for iface, mtu in found.items() if mtu.isdigit()}


def mtu_faults(want: FabricWant, mtus: Mapping[str, Mapping[str, int]], exec_on: ExecOn) -> list[FabricFault]:
    """Each fabric interface whose MTU is not spark-llm:network.mtu, naming the other nodes' MTUs beside it.
    `mtus`: node -> interface -> MTU, for the nodes read (an interface a node lacks is the interfaces check's)."""
    wanted = want.mtu
    values = {mtu for found in mtus.values() for mtu in found.values()}
    faults = []
    for node, found in mtus.items():
        for iface in want.interfaces:
            mtu = found.get(iface)
            if mtu is None or mtu == wanted:
                continue
            others = [f"{other}'s {iface} {of[iface]}" for other, of in mtus.items() if other != node and iface in of]
            beside = f" ({', '.join(others)})" if others else ""
            set_here = f"`{exec_on(node, ['sudo', 'ip', 'link', 'set', iface, 'mtu', str(wanted)])}`"
            if len(values) == 1:  # the nodes agree, the key does not: the key is likely what is wrong
                fix = f"set {MTU_KEY} to {mtu}, the MTU the nodes have, or set {wanted} on each ({set_here}, ...)"
            else:
                fix = f"set MTU {wanted} there ({set_here}, and persist it), or one MTU on every node and in {MTU_KEY}"
            faults.append(
                FabricFault(node, MTU_KEY, iface, f"{node}'s {iface} has MTU {mtu}, {MTU_KEY} is {wanted}{beside}", fix)
            )
    return faults


def fabric_faults(want: FabricWant, hosts: Mapping[str, HostFields], exec_on: ExecOn) -> list[FabricFault]:
    """Every reason the nodes read (`hosts`: node -> its host fields now, in the stack's order) are not ready for a
    start, node by node: its RoCE devices, then its fabric MTUs."""
    mtus = mtu_faults(want, {node: host_mtus(want, fields) for node, fields in hosts.items()}, exec_on)
    faults = []
    for node, fields in hosts.items():
        faults += device_faults(want, node, fields, exec_on)
        faults += [fault for fault in mtus if fault.node == node]
    return faults


# ---------- reading a node's fabric (the supervisor's, before each restart of its own) ----------

FIELD_PREFIX = "host."
FABRIC_REQUEST = "spark-llm fabric"
"""A worker's one request for its fabric fields (scripts/supervisor_allow.sh), followed by the interfaces' names."""


def fields_from(text: str) -> HostFields:
    """`host.FIELD<TAB>VALUE` lines (scripts/lib/host_record.sh's fabric_record) -> {FIELD: VALUE}."""
    out = {}
    for line in text.splitlines():
        name, tab, value = line.partition("\t")
        if tab and name.startswith(FIELD_PREFIX):
            out[name[len(FIELD_PREFIX) :]] = value
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def read_sysfs(sysfs: str, interfaces: Sequence[str]) -> HostFields:
    """fabric_record's fields read from a sysfs mounted at `sysfs` (the head's /sys in the supervisor's container),
    `verbs_devices` NOT_READ (its /dev is not the node's). A field that cannot be read is left out, as there."""
    root = Path(sysfs)
    fields: dict[str, str] = {}
    for iface in interfaces:
        mtu = _read(root / "class" / "net" / iface / "mtu").strip()
        if mtu:
            fields[f"mtu.{iface}"] = mtu
    devices = sorted(p.name for p in (root / "class" / "infiniband").glob("*") if p.is_dir())
    for dev in devices:
        port = root / "class" / "infiniband" / dev / "ports" / "1"
        state = " ".join(_read(port / "state").split(":", 1)[-1].split())
        if state:
            fields[f"port_state.{dev}"] = state
        gids = {g for f in sorted((port / "gids").glob("*")) for g in _read(f).split() if g != ZERO_GID}
        if gids:
            fields[f"gids.{dev}"] = " ".join(sorted(gids))
    if devices:
        fields["roce_devices"] = " ".join(devices)
    fields["verbs_devices"] = NOT_READ
    return fields


ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def held_by(want: FabricWant, hosts: Mapping[str, HostFields], exec_on: ExecOn) -> str | None:
    """Why the supervisor must not restart the group onto these nodes' fabric now (None: it may), in the words of
    `pulumi preview`'s refusal: it waits, saying so, and starts the group once the fabric is ready."""
    faults = fabric_faults(want, hosts, exec_on)
    if not faults:
        return None
    return "the fabric is not ready for a start: " + "; ".join(str(f) for f in faults)
