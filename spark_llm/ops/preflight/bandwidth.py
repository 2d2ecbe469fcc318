"""Pure: `spark-llm preflight --bandwidth`: which tool measures the fabric between the head and a worker, the
scripts that start it (scripts/lib/bandwidth.sh), how its output reads and the verdict against the link's speed.

RDMA (perftest's `ib_write_bw`) where both nodes have an RDMA device: it measures what NCCL's NET/IB would get;
TCP (`iperf3`, four streams) otherwise. Each is started from the node's own binary, else in a container from the
engine image (host network; for RDMA the verbs devices and unlimited locked memory, as the engine gets them). The
figure is compared with the speed the kernel reports for the fabric interface (/sys/class/net/IF/speed): below
half of it fails, as a socket fallback or a link stuck at a lower rate would (field reports: 13% of the link).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from spark_llm.ops.preflight.checks import Check
from spark_llm.ops.render import FAIL, PASS, SKIP
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.scripts import bash_lib
from spark_llm.remote.runner import quote

TOOLS = ("ib_write_bw", "iperf3")
# Below this share of the link's speed the figure fails the check.
FLAG_BELOW = 0.5
# A server outlives its test by at most this much if nothing stops it (a lost ssh session, a killed CLI).
SERVER_SLACK_SECONDS = 30


@dataclass(frozen=True)
class Tool:
    """How a tool can be started on a node: `node` (its own binary, at `where`), `image` (the engine image), or
    None (missing: `where` says why)."""

    name: str
    how: str | None
    where: str

    @property
    def started(self) -> str:
        if self.how == "node":
            return f"the node's own {self.where}"
        return f"a container from the engine image {self.where}"


@dataclass(frozen=True)
class NodeFacts:
    """What one node has for the test: the fabric interface and its speed, RDMA devices, each tool."""

    interface: str | None
    speed_mbit: int | None
    roce: dict[str, str]
    """RDMA device -> its port 1 state (ACTIVE, DOWN...)."""
    tools: dict[str, Tool]


def facts_script(plan: DeploymentPlan, node: NodePlan) -> str:
    return bash_lib("bandwidth") + f"bw_facts {quote(node.fabric_address)} {quote(plan.image.ref)}\n"


def parse_facts(text: str) -> NodeFacts:
    interface, speed, roce, tools = None, None, {}, {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        fields = rest.split()
        if kind == "link" and len(fields) >= 2:
            interface = None if fields[0] == "-" else fields[0]
            # veth, bonds and a link that is down print -1 or nothing: unknown, not zero.
            speed = int(fields[1]) if fields[1].isdigit() and int(fields[1]) > 0 else None
        elif kind == "roce" and len(fields) >= 2:
            roce[fields[0]] = fields[1]
        elif kind == "tool" and len(fields) >= 2:
            # `tool NAME node PATH`, `tool NAME image REF`, or `tool NAME missing: WHY`.
            how = fields[1] if fields[1] in ("node", "image") else None
            tools[fields[0]] = Tool(fields[0], how, " ".join(fields[2:]))
    return NodeFacts(interface, speed, roce, tools)


def rdma_device(plan: DeploymentPlan, facts: NodeFacts) -> str | None:
    """The RDMA device to test with: the first configured one (spark-llm:network.roceDevices) the node has, else
    the node's first ACTIVE one."""
    configured = [d for d in plan.config.network.roce_devices if d in facts.roce]
    active = [d for d, state in sorted(facts.roce.items()) if state == "ACTIVE"]
    found = configured or active
    return found[0] if found else None


@dataclass(frozen=True)
class Choice:
    """The tool for one head <-> worker pair, how each side starts it, or why there is none."""

    tool: str | None
    head: Tool | None = None
    worker: Tool | None = None
    head_device: str | None = None
    worker_device: str | None = None
    missing: str = ""
    fix: str = ""


def choose(plan: DeploymentPlan, worker: NodePlan, head: NodeFacts, own: NodeFacts) -> Choice:
    """RDMA where both nodes have an RDMA device, TCP otherwise; a tool neither node side can start is missing."""
    head_dev, worker_dev = rdma_device(plan, head), rdma_device(plan, own)
    rdma = head_dev is not None and worker_dev is not None
    name = "ib_write_bw" if rdma else "iperf3"
    sides = {plan.head.name: head.tools.get(name), worker.name: own.tools.get(name)}
    missing = [
        f"{node}: {tool.where if tool else 'not reported'}"
        for node, tool in sides.items()
        if tool is None or tool.how is None
    ]
    if missing:
        package = "perftest" if rdma else "iperf3"
        why = (
            "both nodes have RDMA devices"
            if rdma
            else "no RDMA device on "
            + " and ".join(n for n, facts in ((plan.head.name, head_dev), (worker.name, worker_dev)) if facts is None)
        )
        return Choice(
            None,
            missing=f"{name} ({why}): " + "; ".join(missing),
            fix=f"install Debian's {package} on the nodes, or use an engine image that has {name}",
        )
    return Choice(name, sides[plan.head.name], sides[worker.name], head_dev, worker_dev)


def gid_index(plan: DeploymentPlan) -> str:
    """The RoCE GID index NCCL is told to use (NCCL_IB_GID_INDEX in spark-llm:engine.env), for ib_write_bw's `-x`;
    empty: perftest's own choice."""
    return str(plan.config.engine.env.get("NCCL_IB_GID_INDEX", ""))


def serve_script(choice: Choice, plan: DeploymentPlan, worker: NodePlan, port: int, seconds: int) -> str:
    """The worker's server, bounded: it ends by itself SERVER_SLACK_SECONDS after the test's longest run."""
    assert choice.tool is not None and choice.worker is not None and choice.worker.how is not None
    bound = 2 * (seconds + 1) + SERVER_SLACK_SECONDS
    words = [choice.tool, choice.worker.how, plan.image.ref, worker.fabric_address, str(port), str(seconds)]
    words += [str(bound), choice.worker_device or "", gid_index(plan)]
    return bash_lib("bandwidth") + "bw_serve " + " ".join(quote(w) for w in words) + "\n"


def client_script(choice: Choice, plan: DeploymentPlan, worker: NodePlan, port: int, seconds: int) -> str:
    assert choice.tool is not None and choice.head is not None and choice.head.how is not None
    words = [choice.tool, choice.head.how, plan.image.ref, worker.fabric_address, str(port), str(seconds)]
    words += [choice.head_device or "", gid_index(plan)]
    return bash_lib("bandwidth") + "bw_client " + " ".join(quote(w) for w in words) + "\n"


def stop_script(how: str, port: int) -> str:
    """Stops the server of `port` (bw_stop), whether or not its start got as far as printing its handle."""
    return bash_lib("bandwidth") + f"bw_stop {quote(how)} {port}\n"


def server_handle(text: str) -> str | None:
    match = re.search(r"^server (\S+)$", text, re.M)
    return match.group(1) if match else None


# ---------- the figures ----------


def iperf3_mbit(text: str) -> dict[str, float | str]:
    """`bw_client iperf3` output -> {"to": Mbit/s, "from": Mbit/s}, or the error iperf3 gave for a direction."""
    out: dict[str, float | str] = {}
    for direction, body in re.findall(r"^--- (to|from)\n(.*?)(?=^--- |\Z)", text, re.M | re.S):
        try:
            report = json.loads(body[body.index("{") :])
        except ValueError:
            out[direction] = body.strip().splitlines()[-1] if body.strip() else "no output"
            continue
        received = report.get("end", {}).get("sum_received", {}).get("bits_per_second")
        out[direction] = received / 1e6 if received else str(report.get("error", "no figure in iperf3's report"))
    return out


def ib_write_bw_mbit(text: str) -> float | str:
    """perftest's result table (` #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]` and a row)
    -> the average in Mbit/s, or what it printed last."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        unit = re.search(r"BW average\[(Gb/sec|MB/sec|MiB/sec)\]", line)
        if not unit:
            continue
        for row in lines[i + 1 :]:
            fields = row.split()
            if len(fields) >= 4 and fields[0].isdigit():
                value = float(fields[3])
                return value * {"Gb/sec": 1000.0, "MB/sec": 8.0, "MiB/sec": 8 * 1.048576}[unit.group(1)]
    return next((line.strip() for line in reversed(lines) if line.strip()), "no output")


def verdict(
    plan: DeploymentPlan, worker: NodePlan, choice: Choice, figures: dict[str, float | str], speed: int | None
) -> Check:
    """The figures of one pair against the link speed (the slower side's), with the tool and how it started."""
    assert choice.tool is not None and choice.head is not None and choice.worker is not None
    legs = {"to": f"{plan.head.name} -> {worker.name}", "from": f"{worker.name} -> {plan.head.name}"}
    if choice.tool == "ib_write_bw":
        tool = f"ib_write_bw (RDMA, {choice.head_device} -> {choice.worker_device})"
    else:
        tool = "iperf3 (TCP, 4 streams)"
    ran = f"{tool}: on {plan.head.name} {choice.head.started}, on {worker.name} {choice.worker.started}"
    errors = [f"{legs[d]}: {v}" for d, v in figures.items() if isinstance(v, str)]
    if errors or not figures:
        return Check(
            worker.name,
            "bandwidth",
            FAIL,
            "; ".join(errors or ["no figure"]) + f" ({ran})",
            "check the fabric between them (`spark-llm preflight` without --bandwidth pings it) and that nothing"
            " else listens on the test port (--bandwidth-port)",
        )
    measured = {d: v for d, v in figures.items() if isinstance(v, float)}
    text = ", ".join(f"{legs[d]} {mbit_text(v)}" for d, v in measured.items())
    if speed is None:
        return Check(worker.name, "bandwidth", PASS, f"{text}; link speed unknown ({ran})")
    low = {d: v for d, v in measured.items() if v < FLAG_BELOW * speed}
    of = ", ".join(f"{v / speed:.0%}" for v in measured.values())
    detail = f"{text} of a {mbit_text(float(speed))} link ({of}); {ran}"
    if low:
        return Check(
            worker.name,
            "bandwidth",
            FAIL,
            f"below half the link's speed: {detail}",
            "check the cable and both ends' link speed (`ethtool IF`), the MTU (spark-llm:network.mtu), that the"
            " test ran over the fabric interface; with RoCE a reboot cleared a link stuck at a fraction of its speed",
        )
    return Check(worker.name, "bandwidth", PASS, detail)


def mbit_text(mbit: float) -> str:
    return f"{mbit / 1000:.1f} Gbit/s" if mbit >= 1000 else f"{mbit:.0f} Mbit/s"


def skipped(worker: NodePlan, why: str) -> Check:
    return Check(worker.name, "bandwidth", SKIP, why)
