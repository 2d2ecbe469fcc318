"""Pure: is each node's fabric ready for a start? The rule is the group's (spark_llm.group.fabric_ready: the
supervisor applies it before each restart of its own); here it is applied to a plan, with the commands a printed fix
names for the stack (`spark-llm exec --stack NAME ...`).

One rule, the same words everywhere: `pulumi preview` and `up` refuse a start on it before any resource is declared
(components.bootstrap: nothing stops), `spark-llm preflight` shows it in its `rdma` and `interfaces` rows, and the
supervisor holds a restart on it, saying why.
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_llm.group import fabric_ready as rule
from spark_llm.group.fabric_ready import MTU_KEY, ROCE_KEY, FabricFault, FabricWant, device_name
from spark_llm.group.history import HostFields
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.node_commands import SELECTED, StackRef

__all__ = ["MTU_KEY", "ROCE_KEY", "FabricFault", "device_name", "device_faults", "fabric_faults", "mtu_faults"]

NOTHING_RAN = "Nothing was run on any node (no engine was stopped)."


def want(plan: DeploymentPlan) -> FabricWant:
    """What the plan's config asks of every node's fabric."""
    return FabricWant(plan.roce_devices if plan.rdma else (), plan.fabric_interfaces, plan.fabric_mtu)


def device_faults(plan: DeploymentPlan, node: str, fields: HostFields, stack: StackRef = SELECTED) -> list[FabricFault]:
    return rule.device_faults(want(plan), node, fields, stack.exec_on)


def mtu_faults(
    plan: DeploymentPlan, mtus: Mapping[str, Mapping[str, int]], stack: StackRef = SELECTED
) -> list[FabricFault]:
    return rule.mtu_faults(want(plan), mtus, stack.exec_on)


def fabric_faults(
    plan: DeploymentPlan, hosts: Mapping[str, HostFields], stack: StackRef = SELECTED
) -> list[FabricFault]:
    """Every reason the nodes read (`hosts`: node -> its host fields now, in the stack's order) are not ready for a
    start, node by node: its RoCE devices, then its fabric MTUs."""
    return rule.fabric_faults(want(plan), hosts, stack.exec_on)


def refusal(faults: list[FabricFault]) -> str:
    """What `pulumi preview` and `up` stop with, before any resource is declared."""
    return "\n".join(str(fault) for fault in faults) + f"\n{NOTHING_RAN} Fix it, then run `pulumi preview` again."
