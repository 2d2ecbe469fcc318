"""Pure: is each node's fabric ready for a start? Judged from its host fields as read now (spark_llm.plan.host_record).

With spark-llm:network.roceDevices, NCCL opens only the named devices that exist with port 1 ACTIVE (and connects
over an address of theirs, a GID), and lists only those in its `NET/IB : Using` line: a named device that is missing
or down is no error to NCCL, which runs on the others or falls back to TCP sockets (`NET/IB : No device found.`) at
a fraction of the link's speed, found out only after the group was stopped and started again. Docker refuses to
create a container with `--device /dev/infiniband` on a node without it, also after the group was stopped. And the
fabric has one MTU, spark-llm:network.mtu, on every node: nodes set apart (9000 on one, 1500 on the other) run the
link at the smaller at best, and a packet larger than the smaller MTU is dropped, not carried; a configured MTU that
is not the nodes' makes every check at it (preflight's don't-fragment pings) judge another fabric than the one that
runs.

One rule, the same words everywhere: `pulumi preview` and `up` refuse a start on it before any resource is declared
(components.bootstrap: nothing stops), and `spark-llm preflight` shows it in its `rdma` and `interfaces` rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from spark_llm.config import NAMESPACE
from spark_llm.group.history import HostFields
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.host_record import ABSENT
from spark_llm.plan.node_commands import SELECTED, StackRef

ROCE_KEY = f"{NAMESPACE}:network.roceDevices"
MTU_KEY = f"{NAMESPACE}:network.mtu"
ACTIVE = "ACTIVE"
NOTHING_RAN = "Nothing was run on any node (no engine was stopped)."


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


def device_faults(plan: DeploymentPlan, node: str, fields: HostFields, stack: StackRef = SELECTED) -> list[FabricFault]:
    """With roceDevices: the node's /dev/infiniband, and each named device there, ACTIVE, with an address."""
    if not plan.rdma:
        return []
    faults = []
    if fields.get("verbs_devices", ABSENT) == ABSENT:
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
    names = list(dict.fromkeys(device_name(entry) for entry in plan.roce_devices))
    roce = fields.get("roce_devices", ABSENT)
    if roce == ABSENT:
        problem = (
            f"{ROCE_KEY} names {', '.join(names)}, and {node} has no RoCE device (/sys/class/infiniband lists none)"
        )
        fix = f"load the node's RDMA drivers (`ls /sys/class/infiniband` lists the devices), or remove {ROCE_KEY}"
        return [*faults, FabricFault(node, ROCE_KEY, "/sys/class/infiniband", problem, fix)]
    listed = roce.split()
    ibdev2netdev = f"`{stack.exec_on(node, ['ibdev2netdev'])}` lists them with their state"
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


def host_mtus(plan: DeploymentPlan, fields: HostFields) -> dict[str, int]:
    """The fabric interfaces' MTUs a node's host fields give (`mtu.IF`); an interface it lacks is not there."""
    found = {iface: fields.get(f"mtu.{iface}", ABSENT) for iface in plan.fabric_interfaces}
    return {iface: int(mtu) for iface, mtu in found.items() if mtu.isdigit()}


def mtu_faults(
    plan: DeploymentPlan, mtus: Mapping[str, Mapping[str, int]], stack: StackRef = SELECTED
) -> list[FabricFault]:
    """Each fabric interface whose MTU is not spark-llm:network.mtu, naming the other nodes' MTUs beside it.
    `mtus`: node -> interface -> MTU, for the nodes read (an interface a node lacks is the interfaces check's)."""
    want = plan.fabric_mtu
    values = {mtu for found in mtus.values() for mtu in found.values()}
    faults = []
    for node, found in mtus.items():
        for iface in plan.fabric_interfaces:
            mtu = found.get(iface)
            if mtu is None or mtu == want:
                continue
            others = [f"{other}'s {iface} {of[iface]}" for other, of in mtus.items() if other != node and iface in of]
            beside = f" ({', '.join(others)})" if others else ""
            set_here = f"`{stack.exec_on(node, ['sudo', 'ip', 'link', 'set', iface, 'mtu', str(want)])}`"
            if len(values) == 1:  # the nodes agree, the key does not: the key is likely what is wrong
                fix = f"set {MTU_KEY} to {mtu}, the MTU the nodes have, or set {want} on each ({set_here}, ...)"
            else:
                fix = f"set MTU {want} there ({set_here}, and persist it), or one MTU on every node and in {MTU_KEY}"
            faults.append(
                FabricFault(node, MTU_KEY, iface, f"{node}'s {iface} has MTU {mtu}, {MTU_KEY} is {want}{beside}", fix)
            )
    return faults


def fabric_faults(
    plan: DeploymentPlan, hosts: Mapping[str, HostFields], stack: StackRef = SELECTED
) -> list[FabricFault]:
    """Every reason the nodes read (`hosts`: node -> its host fields now, in the stack's order) are not ready for a
    start, node by node: its RoCE devices, then its fabric MTUs."""
    mtus = mtu_faults(plan, {node: host_mtus(plan, fields) for node, fields in hosts.items()}, stack)
    faults = []
    for node, fields in hosts.items():
        faults += device_faults(plan, node, fields, stack)
        faults += [fault for fault in mtus if fault.node == node]
    return faults


def refusal(faults: list[FabricFault]) -> str:
    """What `pulumi preview` and `up` stop with, before any resource is declared."""
    return "\n".join(str(fault) for fault in faults) + f"\n{NOTHING_RAN} Fix it, then run `pulumi preview` again."
