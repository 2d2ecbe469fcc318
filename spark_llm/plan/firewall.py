"""Pure: spark-llm:network.firewall: the group's ports, the nftables table that refuses them on every interface but
the fabric, each node's step script (scripts/lib/firewall.sh), and what preview says while the firewall is off.

The group's ports are those the engines open for each other: the torch rendezvous (engine.distPort), with Ray its
GCS (6379), Ray Client server (10001), worker ports (Ray's default range 10002-19999) and dashboard agent (52365),
and the node's ephemeral range (ip_local_port_range, read on the node), where the ports bound to port 0 land:
NCCL's and Gloo's, vLLM's rendezvous under Ray, Ray's raylet, object manager and agents. A new TCP connection to one
of them from an interface that is not a fabric interface (or loopback) is refused with a reset; everything else
passes: the operator's ssh (the node's ssh port is admitted first, should it fall in a range), replies to the
node's own connections (an established connection is never refused), the API where spark-llm:engine.host says.
"""

from __future__ import annotations

import ipaddress
import shlex
from dataclasses import dataclass

from spark_llm.config.engine import RAY_PORT
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.drift import record_token_script
from spark_llm.plan.nodes import NodePlan
from spark_llm.plan.observation import TOKENS_DIR, NodeObservation
from spark_llm.plan.scripts import bash_lib

# The nftables table of spark-llm's own (family inet: IPv4 and IPv6), on every node.
TABLE = "spark-llm"
FABRIC_ONLY = "fabric-only"
# Ray's fixed ports besides the GCS (Ray 2.x defaults: `ray start --ray-client-server-port`, `--min-worker-port`,
# `--max-worker-port`, `--dashboard-agent-listen-port`).
RAY_CLIENT_PORT = 10001
RAY_WORKER_PORTS = (10002, 19999)
RAY_DASHBOARD_AGENT_PORT = 52365
# The step's name in the drift tokens, and the probe's section for the table while the firewall is on.
STEP = "firewall"
TABLE_SECTION = "firewall_table"
# The probe's sections while the firewall is off (spark_llm.remote.observe: `SECTION<TAB>VALUE` lines).
LISTEN_SECTION = "firewall_listen"
ADDRS_SECTION = "firewall_addrs"
EPHEMERAL_SECTION = "firewall_ephemeral"
EPHEMERAL_WHAT = "the node's ephemeral ports: NCCL's, Gloo's and Ray's random ports"


@dataclass(frozen=True)
class GroupPort:
    """A port or range the group opens for its own members, and what listens there."""

    low: int
    high: int
    what: str

    @property
    def nft(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"

    def holds(self, port: int) -> bool:
        return self.low <= port <= self.high


def enabled(plan: DeploymentPlan) -> bool:
    return plan.config.network.firewall == FABRIC_ONLY


def group_ports(plan: DeploymentPlan) -> tuple[GroupPort, ...]:
    """The group's fixed ports (the ephemeral range is the node's: read there)."""
    ports = [GroupPort(plan.dist_port, plan.dist_port, "engine.distPort: the torch rendezvous")]
    if plan.config.engine.executor == "ray":
        ports += [
            GroupPort(RAY_PORT, RAY_PORT, "Ray's GCS"),
            GroupPort(RAY_CLIENT_PORT, RAY_CLIENT_PORT, "Ray Client server"),
            GroupPort(*RAY_WORKER_PORTS, "Ray's worker processes"),
            GroupPort(RAY_DASHBOARD_AGENT_PORT, RAY_DASHBOARD_AGENT_PORT, "Ray's dashboard agent"),
        ]
    return tuple(ports)


def _quoted(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


def ruleset(plan: DeploymentPlan, node: NodePlan) -> str:
    """The body of `table inet spark-llm` on `node` (nft syntax; `$ephemeral` is defined on the node)."""
    fabric = ", ".join(_quoted(name) for name in plan.fabric_interfaces)
    rules = [
        'iif "lo" accept',
        f"iifname {{ {fabric} }} accept",
        # Replies to the node's own connections (a registry, the head's hops), and connections already made.
        "ct state established,related accept",
        f"tcp dport {node.ssh.port} accept comment \"ssh: the operator's and the head's\"",
    ]
    if node.role == "head":
        api = f"tcp dport {plan.port}"
        listen = ipaddress.ip_address(plan.api_host)
        if listen.is_unspecified:
            rules.append(f'{api} accept comment "engine.port: the API, on every address (engine.host)"')
        else:
            family = "ip" if listen.version == 4 else "ip6"
            rules.append(f'{family} daddr {listen} {api} accept comment "engine.port: the API at engine.host"')
            rules.append(f'{api} reject with tcp reset comment "engine.port: not at engine.host"')
    for port in group_ports(plan):
        rules.append(f"tcp dport {port.nft} reject with tcp reset comment {_quoted(port.what)}")
    rules.append(f"tcp dport $ephemeral reject with tcp reset comment {_quoted(EPHEMERAL_WHAT)}")
    body = "\n".join(f"\t\t{rule}" for rule in rules)
    return (
        f"table inet {plan.own(TABLE)} {{\n"
        "\tchain input {\n"
        "\t\ttype filter hook input priority filter; policy accept;\n"
        f"{body}\n"
        "\t}\n"
        "}\n"
    )


def step_script(node: NodePlan, rules: str, token: str, table: str = TABLE) -> str:
    """The node's firewall step: installs the table (`rules`, from `ruleset`) at create and records its drift token
    with the table's digest as the node lists it; run as the delete ($SPARK_LLM_PHASE=delete: `pulumi destroy`, or
    the firewall turned off) it removes the table and the token. `table`: the group's own (DeploymentPlan.own)."""
    recorded = f"{node.remote_dir}/{TOKENS_DIR}/{STEP}"
    return (
        bash_lib("firewall")
        + 'if [ "${SPARK_LLM_PHASE:-create}" = delete ]; then\n'
        + f"  fw_remove {table}\n"
        + f"  rm -f {shlex.quote(recorded)}\n"
        + "else\n"
        + f"  fw_install {table} <<'SPARK_LLM_RULES'\n"
        + rules
        + "SPARK_LLM_RULES\n"
        + record_token_script(node.remote_dir, STEP, token, f"$(fw_digest {table})")
        + "fi\n"
    )


def steps(plan: DeploymentPlan) -> dict[str, str]:
    """Each node's table (`ruleset`); none when the firewall is off."""
    return {n.name: ruleset(plan, n) for n in plan.nodes} if enabled(plan) else {}


def live_value(facts: dict[str, str], token_value: str | None) -> str | None:
    """The table as the probe saw it, for the step's drift token: its digest, None when it is gone; `unknown` (no
    nft, or no root without a password) counts as what the step recorded: nothing can be said against it."""
    seen = facts.get(TABLE_SECTION)
    if seen is None or seen == "unknown":
        return token_value
    return None if seen == "absent" else seen


def live(observation: NodeObservation) -> str | None:
    """The table as a node's probe saw it, against what its step recorded (`live_value`): the one reading the
    component's drift token and `spark-llm status` both judge."""
    recorded = observation.tokens.get(STEP, "").partition(" ")[2]
    return live_value(observation.facts, recorded or None)


def drift_warning(node: NodePlan, why: str) -> str:
    return (
        f"drift: the firewall (nftables table inet {TABLE}) on {node.name} changed since `pulumi up` ({why}): a"
        " reboot or `nft flush ruleset` (as `systemctl restart nftables` runs) removes it; `pulumi up` installs it"
        " again"
    )


# ---------- while it is off: what preview says ----------


def probe(plan: DeploymentPlan) -> str:
    """Read-only: the table's digest (firewall on); where the node listens over TCP, its addresses by interface, its
    ephemeral range (firewall off)."""
    if enabled(plan):
        return bash_lib("firewall") + f"printf '{TABLE_SECTION}\\t%s\\n' \"$(fw_digest {plan.own(TABLE)})\"\n"
    return (
        f"printf '{LISTEN_SECTION}\\t%s\\n' \"$(ss -Hltn 2>/dev/null | awk '{{print $4}}' | tr '\\n' ' ')\"\n"
        f"printf '{ADDRS_SECTION}\\t%s\\n' \"$(ip -o addr 2>/dev/null | awk '{{print $2\"=\"$4}}' | tr '\\n' ' ')\"\n"
        f"printf '{EPHEMERAL_SECTION}\\t%s\\n' \"$(tr -s '\\t ' '-' </proc/sys/net/ipv4/ip_local_port_range)\"\n"
    )


# Interfaces that are the node's own plumbing, not a network someone else is on: loopback, Docker's bridges.
_OWN_PLUMBING = ("lo", "docker", "br-", "veth", "virbr")


def _loopback(address: str) -> bool:
    """127.0.0.0/8 and ::1 (Docker's embedded DNS listens on 127.0.0.11 in a container's namespace)."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:  # `*` (every address, as ss prints it for some sockets) is not loopback
        return False


def exposed(plan: DeploymentPlan, node: NodePlan, facts: dict[str, str]) -> tuple[list[str], list[str]]:
    """(the group's ports the node listens on beyond the fabric, its addresses beyond the fabric), from the probe."""
    others: list[str] = []
    fabric_addresses = {"127.0.0.1", "::1"}
    for pair in facts.get(ADDRS_SECTION, "").split():
        interface, _, address = pair.partition("=")
        address = address.split("/")[0]
        if interface in plan.fabric_interfaces:
            fabric_addresses.add(address)
        elif not interface.startswith(_OWN_PLUMBING) and not address.startswith("fe80:"):
            others.append(f"{interface} {address}")
    low, _, high = facts.get(EPHEMERAL_SECTION, "").partition("-")
    ports = list(group_ports(plan))
    if low.isdigit() and high.isdigit():
        ports.append(GroupPort(int(low), int(high), EPHEMERAL_WHAT))
    found: list[tuple[int, int, str]] = []
    for listener in dict.fromkeys(facts.get(LISTEN_SECTION, "").split()):
        address, _, port = listener.rpartition(":")
        address = address.strip("[]").split("%")[0]
        if not port.isdigit() or address in fabric_addresses or _loopback(address):
            continue
        held = next((i for i, p in enumerate(ports) if p.holds(int(port))), None)
        if held is not None:
            found.append((held, int(port), f"{listener} ({ports[held].what})"))
    # The named ports first (the rendezvous, Ray's GCS), the ranges' after, each in port order.
    return [text for *_, text in sorted(found)], others


def exposure_warning(plan: DeploymentPlan, node: NodePlan, facts: dict[str, str]) -> str | None:
    """The warning of `pulumi preview` and `up` for one node while the firewall is off and the group's ports there
    can be reached from beyond the fabric; None when they cannot (or the firewall is on)."""
    if enabled(plan) or LISTEN_SECTION not in facts:
        return None
    found, others = exposed(plan, node, facts)
    if not found or not others:
        return None
    shown = ", ".join(found[:6]) + (f" and {len(found) - 6} more" if len(found) > 6 else "")
    return (
        f"spark-llm:network.firewall is off: on {node.name} the group's ports listen beyond the fabric interfaces"
        f" ({', '.join(plan.fabric_interfaces) or 'none named'}), where {', '.join(others)} can be reached: {shown}."
        f" `pulumi config set --path network.firewall {FABRIC_ONLY}` installs a table of spark-llm's own on each"
        " node that refuses them there (docs/real-sparks.md, The firewall)"
    )
