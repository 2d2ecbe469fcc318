"""`spark-llm init` on the nodes: the discovery script, the head's fabric neighbours and the head's pings of the
workers' fabric addresses. Every ssh here is pinned to a key the person accepted (host_keys)."""

from __future__ import annotations

import ipaddress
import json
import re
import shlex

from spark_llm.ops.init.checks import Reach
from spark_llm.ops.init.facts import NodeFacts, parse
from spark_llm.ops.sections import SECTION_FUNCTION, parse_sections
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.scripts import bash_lib
from spark_llm.remote import runner
from spark_llm.remote.ssh import ssh_failure

DISCOVER_SECONDS = 60
# A subnet this small or smaller is swept with one ping per address to fill the head's neighbour table; a larger
# one (a /16 of link-local addresses) is not: its workers are named with --worker.
SWEPT_PREFIX = 22


class DiscoveryError(RuntimeError):
    """A node could not be read: one line naming it, what ssh said and what to check."""


def script(model_path: str, image: str) -> str:
    return SECTION_FUNCTION + bash_lib("discover") + f"discover {shlex.quote(model_path)} {shlex.quote(image)}\n"


def read_node(target: SshHost, address: str, *, model_path: str, image: str) -> NodeFacts:
    """The node's facts (read only: nothing on the node changes)."""
    run = runner.run(target, script(model_path, image), timeout=DISCOVER_SECONDS)
    if run.code == 255 or run.code == runner.NO_ANSWER:
        raise DiscoveryError(_ssh_problem(target, run.stderr, answered=run.code != runner.NO_ANSWER))
    return parse(address, parse_sections(run.stdout))


def hub_revision(head: SshHost, repo: str) -> tuple[str | None, str]:
    """The commit the Hub serves for `repo`'s main now, read on the head (it downloads the weights): (sha, "") or
    (None, why)."""
    run = runner.run(head, SECTION_FUNCTION + bash_lib("discover") + f"hub_revision {shlex.quote(repo)}\n", timeout=60)
    return parse_hub_revision(run.stdout, run.stderr)


def parse_hub_revision(stdout: str, stderr: str) -> tuple[str | None, str]:
    """Pure: the Hub API's answer (JSON with "sha": a 40-hex commit), or why there is none."""
    try:
        sha = json.loads(stdout).get("sha", "")
    except (ValueError, AttributeError):
        last = (stderr.strip().splitlines() or ["no answer"])[-1]
        return None, last
    if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40}", sha):
        return sha, ""
    return None, f"the Hub's answer has no commit ({stdout[:120]!r})"


def _ssh_problem(target: SshHost, stderr: str, *, answered: bool) -> str:
    failure = ssh_failure(stderr, answered=answered)
    # ssh says "nobody@10.0.0.1: Permission denied (publickey)."; the address is in `where` already.
    detail = failure.message.removeprefix(f"{target.user}@{target.host}: ")
    where = f"{target.user}@{target.host}:{target.port}" + (f" through {target.via.host}" if target.via else "")
    if failure.kind == "key refused":
        return (
            f"ssh as {where} was refused ({detail}): check the user (--head USER@ADDRESS, --worker"
            " USER@ADDRESS) and that --key's public key is in that user's ~/.ssh/authorized_keys"
        )
    if failure.kind == "host key mismatch":
        return f"{where} presented another host key than the one just accepted ({detail}): run init again"
    return f"could not read {where} ({detail}): check the address and that the node is up"


def neighbours(head: SshHost, facts: NodeFacts) -> list[str]:
    """Addresses on the head's fabric subnet that answer (a ping sweep of a small subnet, then the neighbour table),
    the head's own left out."""
    iface = facts.fabric_interface
    own = facts.address_on(iface) if iface else None
    if iface is None or own is None:
        return []
    sweep = ""
    # Swept, an address that answers now is REACHABLE; without a sweep, the table's recent entries are all there is.
    states: tuple[str, ...] = ("REACHABLE", "STALE", "DELAY", "PERMANENT")
    if own.network.prefixlen >= SWEPT_PREFIX:
        states = ("REACHABLE", "PERMANENT")
        hosts = " ".join(str(a) for a in own.network.hosts() if a != own.ip)
        sweep = f'for a in {hosts}; do ping -c 1 -W 1 -I {shlex.quote(iface)} "$a" >/dev/null 2>&1 & done; wait\n'
    run = runner.run(head, sweep + f"ip -4 neigh show dev {shlex.quote(iface)}\n", timeout=60)
    found = []
    for line in run.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[-1] in states:
            try:
                address = ipaddress.IPv4Address(fields[0])
            except ValueError:
                continue
            if address in own.network and address != own.ip:
                found.append(str(address))
    return sorted(found, key=ipaddress.IPv4Address)


def reach(head: SshHost, facts: NodeFacts, worker: str, address: str, mtu: int | None) -> Reach:
    """The head pings `address` over its fabric interface with a full frame of the fabric's MTU, DF set."""
    iface = facts.fabric_interface or ""
    size = (mtu or 1500) - 28
    cmd = f"ping -c 1 -W 2 -M do -s {size} -I {shlex.quote(iface)} {shlex.quote(address)}"
    run = runner.run(head, cmd + "\n", timeout=30)
    last = (run.stdout + run.stderr).strip().splitlines()
    return Reach(worker, address, run.ok, f"`{cmd}` on the head: {last[-1] if last else 'no output'}")
