"""Pure: `spark-llm preflight`'s verdicts on the network: the fabric interfaces and their MTU, the RoCE devices,
the fabric at the configured MTU (head <-> each worker, don't-fragment pings from both sides) and the engine's ports
and address on the head. The MTU and the RoCE devices are judged by the rule `pulumi preview` refuses a start on
(spark_llm.plan.fabric_ready), in its words.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from spark_llm.config import NAMESPACE
from spark_llm.ops.preflight.checks import Check
from spark_llm.ops.preflight.script import (
    engine_running,
    parse_addrs,
    parse_links,
    parse_listeners,
    ping_rtt,
    router_running,
)
from spark_llm.ops.render import FAIL, PASS, SKIP, WARN
from spark_llm.ops.sections import Section
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.fabric_ready import ROCE_KEY, device_faults, device_name, mtu_faults
from spark_llm.plan.host_record import parse_host_lines
from spark_llm.plan.node_commands import SELECTED, StackRef
from spark_llm.plan.router import CONTAINER as ROUTER_CONTAINER


def link_mtus(plan: DeploymentPlan, sections: dict[str, Section]) -> dict[str, int]:
    """The MTU of each fabric interface a node's `ip -o link` shows."""
    links = parse_links(sections["links"].body) if "links" in sections else {}
    return {name: links[name].mtu for name in plan.fabric_interfaces if name in links}


def check_interfaces(
    plan: DeploymentPlan,
    node: str,
    fabric_address: str,
    sections: dict[str, Section],
    stack: StackRef = SELECTED,
    *,
    mtus: Mapping[str, Mapping[str, int]] | None = None,
) -> Check:
    """Each fabric interface there, up and at spark-llm:network.mtu. `mtus`: every node's fabric MTUs (link_mtus),
    named beside a node's own when it differs."""
    links = parse_links(sections["links"].body) if "links" in sections else {}
    every = {**(mtus or {}), node: link_mtus(plan, sections)}
    wrong_mtu = {fault.subject: fault for fault in mtu_faults(plan, every, stack) if fault.node == node}
    addrs = parse_addrs(sections["addrs"].body) if "addrs" in sections else {}
    holder = next((name for name, found in addrs.items() if fabric_address in found), None)
    if not plan.fabric_interfaces:
        on = f"on {holder}" if holder else "on no interface"
        return Check(
            node,
            "interfaces",
            SKIP,
            f"spark-llm:network.fabricInterfaces is empty; the fabric address {fabric_address} is {on}",
            f"set it to [{holder}] to pin NCCL/Gloo to the fabric" if holder else "",
        )
    problems, fixes, seen = [], [], []
    for name in plan.fabric_interfaces:
        link = links.get(name)
        if link is None:
            known = ", ".join(n for n in links if n != "lo")
            problems.append(f"no interface {name} (has: {known})")
            fixes.append("fix spark-llm:network.fabricInterfaces (`ip -o link` lists the names)")
        elif not link.up:
            problems.append(f"{name} is down (state {link.state})")
            fixes.append(f"`{stack.exec_on(node, ['sudo', 'ip', 'link', 'set', name, 'up'])}`; check the cable")
        elif name in wrong_mtu:
            problems.append(wrong_mtu[name].problem)
            fixes.append(wrong_mtu[name].fix)
        else:
            seen.append(f"{name} up, MTU {link.mtu}")
    if not problems and holder not in plan.fabric_interfaces:
        problems.append(f"the fabric address {fabric_address} is on {holder or 'no interface'}, not a configured one")
        fixes.append(f"set spark-llm:network.fabricInterfaces to [{holder}]" if holder else "check fabricAddress")
    if problems:
        return Check(node, "interfaces", FAIL, "; ".join(problems), "; ".join(fixes))
    return Check(node, "interfaces", PASS, "; ".join(seen) + f"; {fabric_address} on {holder}")


def check_rdma(plan: DeploymentPlan, node: str, sections: dict[str, Section], stack: StackRef = SELECTED) -> Check:
    """With spark-llm:network.roceDevices: /dev/infiniband, and each device there, ACTIVE, with an address."""
    if not plan.rdma:
        return Check(node, "rdma", SKIP, f"{ROCE_KEY} is empty: NCCL runs over TCP sockets")
    section = sections.get("host")
    if section is None:
        return Check(node, "rdma", SKIP, "not reported")
    fields = parse_host_lines(section.body)
    faults = device_faults(plan, node, fields, stack)
    if faults:
        fixes = dict.fromkeys(fault.fix for fault in faults)
        return Check(node, "rdma", FAIL, "; ".join(fault.problem for fault in faults), "; ".join(fixes))
    devices = ", ".join(dict.fromkeys(device_name(entry) for entry in plan.roce_devices))
    return Check(
        node,
        "rdma",
        PASS,
        f"{devices} ACTIVE, each with an address (GID); /dev/infiniband: {fields['verbs_devices']}",
    )


def _ping_verdict(section: Section | None) -> str:
    if section is None:
        return "unknown"
    return {0: "ok", 4: "small only"}.get(section.rc, "no reply")


def check_fabric(plan: DeploymentPlan, worker: NodePlan, head: dict[str, Section], own: dict[str, Section]) -> Check:
    """head <-> worker at the configured MTU: the head's ping of the worker and the worker's of the head."""
    mtu = plan.fabric_mtu
    legs = [
        (f"{plan.head.name} -> {worker.name} {worker.fabric_address}", head.get(f"fabric:{worker.name}")),
        (f"{worker.name} -> {plan.head.name} {plan.head.fabric_address}", own.get(f"fabric:{plan.head.name}")),
    ]
    verdicts = [(leg, _ping_verdict(section), section) for leg, section in legs]
    if all(v == "unknown" for _, v, _ in verdicts):
        return Check(worker.name, "fabric", SKIP, "not checked: neither side answered ssh")
    bad = [(leg, v) for leg, v, _ in verdicts if v in ("no reply", "small only")]
    if any(v == "no reply" for _, v in bad):
        legs_text = "; ".join(f"{leg}: no reply" for leg, v in bad if v == "no reply")
        return Check(
            worker.name,
            "fabric",
            FAIL,
            f"{legs_text} (ping, MTU {mtu})",
            "check the fabric link (cable, `ip -o addr` on both nodes) and the nodes' fabricAddress",
        )
    if bad:
        legs_text = "; ".join(leg for leg, _ in bad)
        return Check(
            worker.name,
            "fabric",
            FAIL,
            f"{legs_text}: small pings pass, {mtu}-byte packets with don't-fragment do not",
            f"set MTU {mtu} on the fabric interfaces of both nodes, or spark-llm:network.mtu to what the link carries",
        )
    done = [f"{leg} {ping_rtt(section.body)}" for leg, v, section in verdicts if v == "ok" and section]
    done += [f"{leg} not checked (no ssh there)" for leg, v, _ in verdicts if v == "unknown"]
    status = PASS if all(v == "ok" for _, v, _ in verdicts) else WARN
    return Check(worker.name, "fabric", status, f"MTU {mtu} don't-fragment: " + "; ".join(done))


def _same_address(text: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    try:
        return ipaddress.ip_address(text) == address
    except ValueError:  # not an address `ip -o addr` should print; it is not ours either way
        return False


def _api_address_missing(plan: DeploymentPlan, node: str, sections: dict[str, Section]) -> Check | None:
    """spark-llm:engine.host names one address the head does not have: the API could not listen there."""
    listen = ipaddress.ip_address(plan.api_host)
    addrs = sections.get("addrs")
    if listen.is_unspecified or listen.is_loopback or addrs is None or not addrs.ok:
        return None
    own = sorted({a for found in parse_addrs(addrs.body).values() for a in found})
    if any(_same_address(a, listen) for a in own):
        return None
    return Check(
        node,
        "ports",
        FAIL,
        f"spark-llm:engine.host {plan.api_host} is not an address of {node} ({', '.join(own)}): the API cannot"
        " listen there",
        "set spark-llm:engine.host to one of them, or 0.0.0.0 (every address)",
    )


def check_ports(
    plan: DeploymentPlan,
    node: str,
    sections: dict[str, Section],
    stack: StackRef = SELECTED,
    *,
    with_router: bool = True,
) -> Check:
    """The group's API and rendezvous ports on the head (and the router's, `with_router`): free, or held by ours.
    Each port is named by its key as the stack file spells it (`engine.port`, `models[1].engine.port`)."""
    missing = _api_address_missing(plan, node, sections)
    if missing is not None:
        return missing
    section = sections.get("ports")
    if section is None or not section.ok:
        return Check(node, "ports", SKIP, "`ss -Hltn` did not answer")
    listening = parse_listeners(section.body)
    ours = engine_running(sections)
    free: list[str] = []
    busy: list[str] = []
    held: dict[str, list[str]] = {}  # whose -> its ports
    engine = plan.key("engine")
    ports = [
        (_short(plan.key("engine.port")), plan.port, ours, f"our engine {plan.container}", engine),
        (_short(plan.key("engine.distPort")), plan.dist_port, ours, f"our engine {plan.container}", engine),
    ]
    if plan.router_port is not None and with_router:
        router = (_short(f"{NAMESPACE}:router.port"), plan.router_port, router_running(sections))
        ports.append((*router, f"our router {ROUTER_CONTAINER}", f"{NAMESPACE}:router"))
    owners: list[str] = []
    for key, port, running, whose, owner in ports:
        if port not in listening:
            free.append(f"{port} ({key}) free")
        elif running:
            held.setdefault(whose, []).append(f"{port} ({key})")
        else:
            busy.append(f"{port} ({key})")
            owners.append(owner)
    if busy:
        return Check(
            node,
            "ports",
            FAIL,
            f"in use by something other than our engine: {', '.join(busy)}",
            f"stop what listens there (`{stack.exec_on(node, ['sudo', 'ss', '-ltnp'])}` names it), "
            f"or choose other {' and '.join(dict.fromkeys(owners))} ports",
        )
    detail = "; ".join([*free, *(f"{', '.join(taken)} held by {whose}" for whose, taken in held.items())])
    return Check(node, "ports", PASS, detail)


def _short(key: str) -> str:
    """A key without the namespace, as a port's note names it (`engine.port`, `models[1].engine.port`)."""
    return key.removeprefix(f"{NAMESPACE}:")
