"""`spark-llm preflight`: every node checked for what the deployment needs, before `pulumi up`.

Per node, checks with pass/fail and a fix: ssh (the pinned host key; a mismatch is not an unreachable node),
clock skew against this machine, Docker, GPU, disk at the model path, memory, the fabric interfaces, the
fabric at the configured MTU (head <-> each worker, don't-fragment pings), the engine's ports on the head,
the image (same ID as the head's, the configured platform) and, with `--check-flags`, the engine flags the
config uses against the image's own `--help` (the seeds' `--language-model-only`: a vLLM flag SGLang refused).

One ssh connection per node, all nodes in parallel, runs a read-only script that prints every fact; the
verdicts are pure functions of those facts. `warn` is what `pulumi up` will take care of (an image it
transfers); only `fail` makes the exit code non-zero.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import shlex
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass

from rich.table import Table

from spark_llm.config import Network, StackConfig
from spark_llm.ops import render
from spark_llm.ops.nodes import (
    SECTION_FUNCTION,
    NodeRun,
    Section,
    fingerprint,
    parse_sections,
    presented_host_key,
    quote,
    run_with_clock,
    ssh_failure,
)
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.ops.render import FAIL, PASS, SIMULATED, SKIP, WARN, gb
from spark_llm.plan.deployment import DeploymentPlan, NodePlan, node_launches
from spark_llm.plan.node_commands import SELECTED, StackRef, read_host_key

# Written on every sim node by `sim up` (sim/nodes.py): a node without a GPU on purpose.
SIM_MARKER = "/etc/spark-llm/simulated-node"
GB = 1_000_000_000
# IPv4 + ICMP headers: a ping payload of MTU - 28 bytes fills one packet of the MTU exactly.
PING_OVERHEAD = 28


@dataclass(frozen=True)
class Check:
    """One row of the table: a check on a node, its verdict, what was seen and how to fix it."""

    node: str
    check: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Limits:
    """What the disk, memory and clock checks compare against."""

    model_size: int | None
    """Bytes of the weights, None when unknown."""
    model_size_from: str
    disk_margin: int
    memory_margin: int
    max_clock_skew: float


# ---------- the script every node runs (pure) ----------

_FACT_FUNCTIONS = rf"""gpu() {{
  if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi -L; return; fi
  if [ -e {SIM_MARKER} ]; then echo "simulated node: no GPU"; return 3; fi
  echo "nvidia-smi: command not found"
  return 127
}}
# Free space on the file system that holds (or will hold) the weights, then the bytes already there.
disk() {{
  local p=$MODEL_PATH
  while [ ! -e "$p" ]; do p=$(dirname "$p"); done
  df -B1 --output=avail,size,target "$p" | tail -n 1
  if [ -d "$MODEL_PATH" ]; then du -sb "$MODEL_PATH" 2>/dev/null | cut -f1; else echo 0; fi
}}
# ADDRESS PAYLOAD: two don't-fragment pings that fill the MTU; exit 4 when only a small ping gets through.
ping_mtu() {{
  if ping -n -q -M do -s "$2" -c 2 -i 0.2 -W 2 "$1"; then return 0; fi
  if ping -n -q -c 1 -W 2 "$1" >/dev/null 2>&1; then return 4; fi
  return 1
}}
source_size() {{ du -sb "$1" | cut -f1; }}
"""


# The engine's server entry point as the profiles run it, asked for its flags.
ENGINE_HELP = {"sglang": ["python3", "-m", "sglang.launch_server", "--help"], "vllm": ["vllm", "serve", "--help"]}


def engine_help_command(cfg: StackConfig) -> list[str]:
    return ENGINE_HELP[cfg.engine.kind]


def _engine_words(argv: tuple[str, ...]) -> list[str]:
    """The engine's own command words: a `bash -c` launch (Ray) holds them on its `vllm serve` line."""
    if argv[:2] != ("bash", "-c"):
        return list(argv)
    lines = [line for line in argv[2].splitlines() if "vllm serve" in line]
    return [w for line in lines for w in shlex.split(line)]


def used_flags(cfg: StackConfig) -> list[str]:
    """Every `--flag` the launch script passes to the engine (all nodes), in order, without duplicates."""
    words = [w for launch in node_launches(cfg).values() for w in _engine_words(launch.argv)]
    flags = [w.split("=", 1)[0] for w in words if w.startswith("--")]
    return list(dict.fromkeys(flags))


def node_script(plan: DeploymentPlan, node: NodePlan, *, check_flags: bool) -> str:
    """The read-only script run on `node`: one `capture` section per fact."""
    cfg = plan.config
    payload = cfg.network.mtu - PING_OVERHEAD
    lines = [
        SECTION_FUNCTION + _FACT_FUNCTIONS,
        f"MODEL_PATH={quote(cfg.model.path)}",
        f"IMAGE_REF={quote(cfg.image.ref)}",
        f"CONTAINER={quote(cfg.engine.container_name)}",
        "capture docker docker info --format '{{.ServerVersion}} {{.OSType}}/{{.Architecture}}'",
        "capture gpu gpu",
        "capture disk disk",
        "capture memory grep -E '^(MemTotal|MemAvailable):' /proc/meminfo",
        "capture links ip -o link",
        "capture addrs ip -o addr",
        "capture engine docker inspect --format '{{.State.Status}}' \"$CONTAINER\"",
        "capture image docker image inspect --format '{{.Id}} {{.Os}}/{{.Architecture}}' \"$IMAGE_REF\"",
    ]
    if node.role == "head":
        lines.append("capture ports ss -Hltn")
        for worker in plan.workers:
            lines.append(f"capture fabric:{worker.name} ping_mtu {quote(worker.fabric_address)} {payload}")
        source = cfg.model.effective_source
        if source.kind == "head" and source.path:
            lines.append(f"capture source source_size {quote(source.path)}")
        if check_flags:
            command = " ".join(quote(word) for word in engine_help_command(cfg))
            lines.append(f'capture flags timeout 300 docker run --rm --network none "$IMAGE_REF" {command}')
    else:
        lines.append(f"capture fabric:{plan.head.name} ping_mtu {quote(plan.head.fabric_address)} {payload}")
    return "\n".join(lines) + "\n"


# ---------- parsing what the nodes printed (pure) ----------


@dataclass(frozen=True)
class Link:
    name: str
    flags: frozenset[str]
    mtu: int
    state: str

    @property
    def up(self) -> bool:
        return "UP" in self.flags and "LOWER_UP" in self.flags and self.state not in ("DOWN", "LOWERLAYERDOWN")


def parse_links(text: str) -> dict[str, Link]:
    """`ip -o link` -> {name: Link}; `eth0@if178` is eth0."""
    links = {}
    for line in text.splitlines():
        match = re.match(r"^\d+:\s+([^:@\s]+)(?:@[^:]+)?:\s+<([^>]*)>(.*)$", line)
        if not match:
            continue
        rest = match.group(3)
        mtu = re.search(r"\bmtu (\d+)", rest)
        state = re.search(r"\bstate (\S+)", rest)
        links[match.group(1)] = Link(
            name=match.group(1),
            flags=frozenset(f for f in match.group(2).split(",") if f),
            mtu=int(mtu.group(1)) if mtu else 0,
            state=state.group(1) if state else "UNKNOWN",
        )
    return links


def parse_addrs(text: str) -> dict[str, list[str]]:
    """`ip -o addr` -> {interface: [address without prefix length]}."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("inet", "inet6"):
            out.setdefault(fields[1], []).append(fields[3].split("/")[0])
    return out


def parse_listeners(text: str) -> set[int]:
    """`ss -Hltn` -> the TCP ports something listens on."""
    ports = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[3].rsplit(":", 1)[-1].isdigit():
            ports.add(int(fields[3].rsplit(":", 1)[-1]))
    return ports


def parse_meminfo(text: str) -> dict[str, int]:
    """`/proc/meminfo` lines -> {field: bytes}."""
    out = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+):\s+(\d+)\s*kB", line)
        if match:
            out[match.group(1)] = int(match.group(2)) * 1024
    return out


def ping_rtt(text: str) -> str:
    match = re.search(r"= [\d.]+/([\d.]+)/", text)
    return f"rtt {float(match.group(1)):.2f} ms" if match else "replied"


def platform_of(docker_info: str) -> str | None:
    """`20.10.24 linux/x86_64` (docker info) -> `linux/amd64`, as an image's platform is written."""
    fields = docker_info.split()
    if len(fields) < 2 or "/" not in fields[-1]:
        return None
    os_type, arch = fields[-1].split("/", 1)
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(arch, arch)
    return f"{os_type}/{arch}"


def help_flags(text: str) -> set[str]:
    """Every `--flag` an engine's `--help` lists."""
    return set(re.findall(r"(?<![\w-])--[A-Za-z0-9][A-Za-z0-9_-]*", text))


def unknown_flags(used: Sequence[str], listed: set[str]) -> list[str]:
    """Flags the engine does not list; a unique prefix of a listed flag counts (argparse's abbreviations)."""
    return [f for f in used if f not in listed and len([x for x in listed if x.startswith(f)]) != 1]


# ---------- verdicts (pure) ----------


def check_ssh(
    cfg: StackConfig, node: NodePlan, run: NodeRun | None, presented: str | None, stack: StackRef = SELECTED
) -> Check:
    index = next(i for i, n in enumerate(cfg.nodes) if n.name == node.name)
    target = node.ssh
    where = f"{target.user}@{target.host}:{target.port}" + (f" via {target.via.name}" if target.via else "")
    if run is None:
        via = target.via.name if target.via else "?"
        return Check(node.name, "ssh", FAIL, f"{where}: not tried, its jump host {via} is not reachable", f"fix {via}")
    if not run.ssh_failed:
        return Check(node.name, "ssh", PASS, f"{where}, host key {fingerprint(target.host_key)} as pinned")
    failure = ssh_failure(run)
    if failure.kind == "host key mismatch":
        seen = f"presents {fingerprint(presented)}" if presented else "presents another key"
        return Check(
            node.name,
            "ssh",
            FAIL,
            f"host key mismatch: {where} {seen}, spark-llm:nodes[{index}].hostKey pins {fingerprint(target.host_key)}",
            f"if the node was reinstalled, read the key it presents (`{read_host_key(stack, node)}`), confirm it on "
            f"its console, then pin it in spark-llm:nodes[{index}].hostKey; otherwise something else answers at "
            f"{target.host}",
        )
    if failure.kind == "key refused":
        return Check(
            node.name,
            "ssh",
            FAIL,
            f"{where}: key refused ({failure.message})",
            f"authorize {target.key_path}.pub in ~{target.user}/.ssh/authorized_keys on {node.name}, "
            f"or set spark-llm:nodes[{index}].keyPath / spark-llm:sshKeyPath",
        )
    path_hint = f" and that {target.via.name} reaches it at {target.host} (the fabric)" if target.via else ""
    return Check(
        node.name,
        "ssh",
        FAIL,
        f"{where}: {failure.kind} ({failure.message})",
        f"check that {node.name} is up, sshd runs on port {target.port}{path_hint}",
    )


def check_clock(node: str, run: NodeRun, max_skew: float) -> Check:
    if run.clock_skew is None:
        return Check(node, "clock", SKIP, "not measured")
    error = run.clock_error or 0.0
    detail = f"{run.clock_skew:+.3f} s against this machine (±{error:.3f} s)"
    if abs(run.clock_skew) - error > max_skew:
        return Check(
            node,
            "clock",
            FAIL,
            detail + f", more than {max_skew:g} s",
            "turn on time sync on the node (`timedatectl set-ntp true`, chrony) and on this machine",
        )
    return Check(node, "clock", PASS, detail)


def check_docker(node: str, section: Section | None, stack: StackRef = SELECTED, user: str = "USER") -> Check:
    if section is None:
        return Check(node, "docker", SKIP, "not reported")
    if section.ok:
        version, _, platform = section.first_line.partition(" ")
        return Check(node, "docker", PASS, f"Docker {version}, {platform}")
    message = section.first_line
    if "permission denied" in message.lower():
        usermod = stack.exec_on(node, ["sudo", "usermod", "-aG", "docker", user])
        fix = f"add the login user to the docker group (`{usermod}`), then log in again"
    elif "command not found" in message or "not found" in message.split(":")[-1]:
        fix = "install Docker and the NVIDIA container toolkit"
    else:
        fix = f"start the engine: `{stack.exec_on(node, ['sudo', 'systemctl', 'start', 'docker'])}`"
    return Check(node, "docker", FAIL, f"`docker info` failed: {message}", fix)


def check_gpu(node: str, section: Section | None) -> Check:
    if section is None:
        return Check(node, "gpu", SKIP, "not reported")
    if section.ok:
        gpus = [line.strip() for line in section.body.splitlines() if line.strip()]
        return Check(node, "gpu", PASS, "; ".join(gpus) or "nvidia-smi -L listed nothing")
    if section.rc == 3:
        return Check(node, "gpu", SIMULATED, "no GPU: simulated node")
    return Check(
        node,
        "gpu",
        FAIL,
        f"`nvidia-smi -L` failed: {section.first_line}",
        "install the NVIDIA driver (DGX OS ships it); `nvidia-smi -L` must list the GPU",
    )


def check_disk(node: str, cfg: StackConfig, section: Section | None, limits: Limits) -> Check:
    if section is None or not section.ok:
        return Check(
            node, "disk", FAIL if section else SKIP, f"no answer from df: {section.first_line if section else ''}"
        )
    lines = section.body.splitlines()
    fields = lines[0].split() if lines else []
    if len(fields) < 3 or not fields[0].isdigit():
        return Check(node, "disk", FAIL, f"could not read df: {section.body[:200]}", "")
    free, mount = int(fields[0]), fields[2]
    present = int(lines[1]) if len(lines) > 1 and lines[1].strip().isdigit() else 0
    where = f"{gb(free)} free on {mount} (for {cfg.model.path})"
    if limits.model_size is None:
        need = limits.disk_margin
        if free < need:
            return Check(node, "disk", FAIL, f"{where}, less than the margin {gb(need)}", "free space on " + mount)
        return Check(
            node,
            "disk",
            WARN,
            f"{where}; the model's size is unknown ({limits.model_size_from})",
            "pass --model-size-gb to check the space for the weights",
        )
    missing = max(limits.model_size - present, 0)
    need = missing + limits.disk_margin
    held = f", {gb(present)} of the weights already there" if present >= GB // 10 else ""
    detail = f"{where}{held}; needs {gb(missing)} + margin {gb(limits.disk_margin)} = {gb(need)}"
    if free < need:
        return Check(
            node,
            "disk",
            FAIL,
            detail,
            f"free {gb(need - free)} on {mount}, or set spark-llm:model.path to a larger file system",
        )
    return Check(node, "disk", PASS, detail)


def check_memory(node: str, sections: dict[str, Section], limits: Limits, nodes: int) -> Check:
    section = sections.get("memory")
    info = parse_meminfo(section.body) if section else {}
    if "MemAvailable" not in info:
        return Check(node, "memory", SKIP, "MemAvailable not reported")
    available, total = info["MemAvailable"], info.get("MemTotal", 0)
    detail = f"{gb(available)} available of {gb(total)}"
    engine = sections.get("engine")
    if engine is not None and engine.ok and engine.first_line == "running":
        return Check(node, "memory", PASS, detail + " (our engine runs here and holds its share)")
    share = (limits.model_size or 0) // max(nodes, 1)
    need = share + limits.memory_margin
    detail += f"; needs {gb(share)} (weights / {nodes} nodes) + margin {gb(limits.memory_margin)}"
    if available < need:
        return Check(node, "memory", FAIL, detail, "stop what holds the memory (other models, old engine containers)")
    return Check(node, "memory", PASS, detail)


def check_interfaces(
    node: str, network: Network, fabric_address: str, sections: dict[str, Section], stack: StackRef = SELECTED
) -> Check:
    links = parse_links(sections["links"].body) if "links" in sections else {}
    addrs = parse_addrs(sections["addrs"].body) if "addrs" in sections else {}
    holder = next((name for name, found in addrs.items() if fabric_address in found), None)
    if not network.fabric_interfaces:
        on = f"on {holder}" if holder else "on no interface"
        return Check(
            node,
            "interfaces",
            SKIP,
            f"spark-llm:network.fabricInterfaces is empty; the fabric address {fabric_address} is {on}",
            f"set it to [{holder}] to pin NCCL/Gloo to the fabric" if holder else "",
        )
    problems, fixes, seen = [], [], []
    for name in network.fabric_interfaces:
        link = links.get(name)
        if link is None:
            known = ", ".join(n for n in links if n != "lo")
            problems.append(f"no interface {name} (has: {known})")
            fixes.append("fix spark-llm:network.fabricInterfaces (`ip -o link` lists the names)")
        elif not link.up:
            problems.append(f"{name} is down (state {link.state})")
            fixes.append(f"`{stack.exec_on(node, ['sudo', 'ip', 'link', 'set', name, 'up'])}`; check the cable")
        elif link.mtu < network.mtu:
            problems.append(f"{name} has MTU {link.mtu}, below spark-llm:network.mtu {network.mtu}")
            mtu = stack.exec_on(node, ["sudo", "ip", "link", "set", name, "mtu", str(network.mtu)])
            fixes.append(f"`{mtu}` (and persist it), or lower network.mtu")
        else:
            seen.append(f"{name} up, MTU {link.mtu}")
    if not problems and holder not in network.fabric_interfaces:
        problems.append(f"the fabric address {fabric_address} is on {holder or 'no interface'}, not a configured one")
        fixes.append(f"set spark-llm:network.fabricInterfaces to [{holder}]" if holder else "check fabricAddress")
    if problems:
        return Check(node, "interfaces", FAIL, "; ".join(problems), "; ".join(fixes))
    return Check(node, "interfaces", PASS, "; ".join(seen) + f"; {fabric_address} on {holder}")


def _ping_verdict(section: Section | None) -> str:
    if section is None:
        return "unknown"
    return {0: "ok", 4: "small only"}.get(section.rc, "no reply")


def check_fabric(plan: DeploymentPlan, worker: NodePlan, head: dict[str, Section], own: dict[str, Section]) -> Check:
    """head <-> worker at the configured MTU: the head's ping of the worker and the worker's of the head."""
    mtu = plan.config.network.mtu
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


def _api_address_missing(cfg: StackConfig, node: str, sections: dict[str, Section]) -> Check | None:
    """spark-llm:engine.host names one address the head does not have: the API could not listen there."""
    listen = ipaddress.ip_address(cfg.engine.host)
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
        f"spark-llm:engine.host {cfg.engine.host} is not an address of {node} ({', '.join(own)}): the API cannot"
        " listen there",
        "set spark-llm:engine.host to one of them, or 0.0.0.0 (every address)",
    )


def check_ports(cfg: StackConfig, node: str, sections: dict[str, Section], stack: StackRef = SELECTED) -> Check:
    missing = _api_address_missing(cfg, node, sections)
    if missing is not None:
        return missing
    section = sections.get("ports")
    if section is None or not section.ok:
        return Check(node, "ports", SKIP, "`ss -Hltn` did not answer")
    listening = parse_listeners(section.body)
    engine = sections.get("engine")
    ours = engine is not None and engine.ok and engine.first_line == "running"
    free, held, busy = [], [], []
    for key, port in (("engine.port", cfg.engine.port), ("engine.distPort", cfg.engine.dist_port)):
        if port not in listening:
            free.append(f"{port} ({key}) free")
        elif ours:
            held.append(f"{port} ({key})")
        else:
            busy.append(f"{port} ({key})")
    if busy:
        return Check(
            node,
            "ports",
            FAIL,
            f"in use by something other than our engine: {', '.join(busy)}",
            f"stop what listens there (`{stack.exec_on(node, ['sudo', 'ss', '-ltnp'])}` names it), "
            "or choose other spark-llm:engine ports",
        )
    detail = "; ".join(
        [*free, *([f"{', '.join(held)} held by our engine {cfg.engine.container_name}"] if held else [])]
    )
    return Check(node, "ports", PASS, detail)


def check_image(cfg: StackConfig, node: NodePlan, sections: dict[str, Section], head_image_id: str | None) -> Check:
    image = cfg.image
    docker = sections.get("docker")
    platform = platform_of(docker.first_line) if docker is not None and docker.ok else None
    if platform is None:
        return Check(node.name, "image", SKIP, "docker did not answer")
    if platform != image.platform:
        return Check(
            node.name,
            "image",
            FAIL,
            f"{node.name} runs {platform}, spark-llm:image.platform is {image.platform}",
            "deploy to nodes of the image's platform, or set spark-llm:image.platform (a DGX Spark is linux/arm64)",
        )
    section = sections.get("image")
    if section is not None and section.ok:
        image_id, _, image_platform = section.first_line.partition(" ")
        short = image_id.removeprefix("sha256:")[:12]
        if image_platform != image.platform:
            return Check(
                node.name,
                "image",
                FAIL,
                f"{image.ref} ({short}) is {image_platform}, not {image.platform}",
                f"use an image built for {image.platform} (`docker pull --platform {image.platform} ...`)",
            )
        if node.role != "head" and head_image_id and image_id != head_image_id:
            detail = f"{image.ref} is {short} here, {head_image_id.removeprefix('sha256:')[:12]} on the head"
            if image.mode == "present":
                return Check(node.name, "image", FAIL, detail, "put the head's image on this node (docker save | load)")
            return Check(node.name, "image", WARN, detail + f"; `pulumi up` replaces it (mode {image.mode})")
        same = ", the head's ID" if node.role != "head" and head_image_id else ""
        return Check(node.name, "image", PASS, f"{image.ref} {short} {image_platform}{same}")
    absent = f"{image.ref} is not on {node.name}"
    load = f"`docker load -i IMAGE.tar` or `docker pull --platform {image.platform} {image.ref}`"
    if image.mode == "present":
        return Check(node.name, "image", FAIL, absent, f"put it there ({load}), or set spark-llm:image.mode transfer")
    if image.mode == "pull":
        return Check(node.name, "image", WARN, absent + "; `pulumi up` pulls it")
    if node.role == "head" and image.source == "head":
        return Check(
            node.name,
            "image",
            FAIL,
            absent + "; spark-llm:image.source head sends the head's image to the workers",
            f"put it on the head ({load}), or set spark-llm:image.source operator",
        )
    source = "this machine" if node.role == "head" else "the head, over the fabric"
    return Check(node.name, "image", WARN, absent + f"; `pulumi up` transfers it from {source}")


def check_flags(cfg: StackConfig, node: str, section: Section | None) -> Check:
    command = " ".join(engine_help_command(cfg))
    if section is None:
        return Check(node, "engine flags", SKIP, "not checked")
    if not section.ok:
        return Check(
            node,
            "engine flags",
            FAIL,
            f"`{command}` failed in {cfg.image.ref} (exit {section.rc}): {section.first_line}",
            "check the image and spark-llm:engine.kind",
        )
    listed = help_flags(section.body)
    unknown = unknown_flags(used_flags(cfg), listed)
    if unknown:
        return Check(
            node,
            "engine flags",
            FAIL,
            f"the image's engine does not list {', '.join(unknown)} (`{command}`)",
            "remove them from spark-llm:engine.flags (another engine's flags?), or use an image whose engine has them",
        )
    return Check(node, "engine flags", PASS, f"all {len(used_flags(cfg))} flags the config uses are in `{command}`")


def model_size(cfg: StackConfig, override_gb: float | None, head: dict[str, Section]) -> tuple[int | None, str]:
    """The weights' size in bytes and where it came from: the flag, the source directory, or unknown."""
    if override_gb is not None:
        return int(override_gb * GB), "--model-size-gb"
    source = cfg.model.effective_source
    if source.kind == "local" and source.path:
        total = 0
        for root, _dirs, files in os.walk(os.path.expanduser(source.path)):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        return total, f"local directory {source.path}"
    if source.kind == "head":
        section = head.get("source")
        if section is not None and section.ok and section.first_line.isdigit():
            return int(section.first_line), f"du of {source.path} on the head"
        return None, f"{source.path} not found on the head"
    return None, "a huggingface source: pass --model-size-gb"


def judge(
    plan: DeploymentPlan,
    runs: dict[str, NodeRun | None],
    presented: dict[str, str | None],
    limits: Limits,
    *,
    check_flags_too: bool = False,
    stack: StackRef = SELECTED,
) -> list[Check]:
    """Every check of every node from what the nodes printed; `runs[n]` None: not tried (its jump host failed)."""
    cfg = plan.config
    facts = {name: parse_sections(run.stdout) if run and not run.ssh_failed else {} for name, run in runs.items()}
    head = facts.get(plan.head.name, {})
    head_image = head.get("image")
    head_image_id = head_image.first_line.partition(" ")[0] if head_image is not None and head_image.ok else None
    checks: list[Check] = []
    for node in plan.nodes:
        run = runs.get(node.name)
        own = facts.get(node.name, {})
        checks.append(check_ssh(cfg, node, run, presented.get(node.name), stack))
        fabric = check_fabric(plan, node, head, own) if node.role == "worker" else None
        if run is None or run.ssh_failed:
            if fabric is not None and fabric.status != SKIP:
                checks.append(fabric)
            checks.append(Check(node.name, "other checks", SKIP, "not run: no ssh session"))
            continue
        checks.append(check_clock(node.name, run, limits.max_clock_skew))
        checks.append(check_docker(node.name, own.get("docker"), stack, node.ssh.user))
        checks.append(check_gpu(node.name, own.get("gpu")))
        checks.append(check_disk(node.name, cfg, own.get("disk"), limits))
        checks.append(check_memory(node.name, own, limits, len(plan.nodes)))
        checks.append(check_interfaces(node.name, cfg.network, node.fabric_address, own, stack))
        checks.append(fabric if fabric is not None else check_ports(cfg, node.name, own, stack))
        checks.append(check_image(cfg, node, own, head_image_id))
        if node.role == "head" and check_flags_too:
            checks.append(check_flags(cfg, node.name, own.get("flags")))
    return checks


def summary(checks: Sequence[Check]) -> dict[str, int]:
    counts = {status: 0 for status in (PASS, WARN, SIMULATED, SKIP, FAIL)}
    for check in checks:
        counts[check.status] = counts.get(check.status, 0) + 1
    return counts


def checks_table(checks: Sequence[Check], title: str | None = None) -> Table:
    rows = [[c.node, c.check, c.status, c.detail, c.fix] for c in checks]
    return render.table(title, ["node", "check", "status", "detail", "fix"], rows, status_column="status")


# ---------- the command ----------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-size-gb", type=float, help="size of the weights (default: from the model source)")
    parser.add_argument("--disk-margin-gb", type=float, default=10.0, help="free space beyond the weights (10)")
    parser.add_argument("--memory-margin-gb", type=float, default=4.0, help="memory beyond a node's weights (4)")
    parser.add_argument("--max-clock-skew", type=float, default=1.0, help="seconds a node's clock may be off (1)")
    parser.add_argument(
        "--check-flags", action="store_true", help="run the engine's --help in the image and check the config's flags"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per node (120)")


def probe(plan: DeploymentPlan, node: NodePlan, args: argparse.Namespace) -> tuple[NodeRun, str | None]:
    """Run the node's script; on a host key mismatch, also read the key the node presents now."""
    run = run_with_clock(node.ssh, node_script(plan, node, check_flags=args.check_flags), timeout=args.timeout)
    presented = None
    if run.ssh_failed and ssh_failure(run).kind == "host key mismatch":
        presented = presented_host_key(node.ssh)
    return run, presented


def collect(
    plan: DeploymentPlan, args: argparse.Namespace, update: Callable[[str], None] | None = None
) -> tuple[dict[str, NodeRun | None], dict[str, str | None]]:
    """Every node's run, in parallel; a worker whose jump host failed ssh is not tried (None)."""
    runs: dict[str, NodeRun | None] = {}
    presented: dict[str, str | None] = {}
    pending = {n.name for n in plan.nodes}
    with ThreadPoolExecutor(max_workers=len(plan.nodes)) as pool:
        futures = {pool.submit(probe, plan, node, args): node for node in plan.nodes}
        for future in as_completed(futures):
            node = futures[future]
            runs[node.name], presented[node.name] = future.result()
            pending.discard(node.name)
            if update is not None:
                update(
                    f"preflight: {len(runs)}/{len(plan.nodes)} nodes checked; waiting for {', '.join(sorted(pending))}"
                )
    for node in plan.nodes:
        via = node.ssh.via
        if via is not None and (jump := runs.get(via.name)) is not None and jump.ssh_failed:
            runs[node.name] = None
    return runs, presented


def run(pulumi: PulumiCli, plan: DeploymentPlan, args: argparse.Namespace) -> int:
    start = time.monotonic()
    with render.progress(f"preflight: checking {len(plan.nodes)} nodes", enabled=not args.json) as update:
        runs, presented = collect(plan, args, update)
    head_run = runs.get(plan.head.name)
    head = parse_sections(head_run.stdout) if head_run is not None and not head_run.ssh_failed else {}
    size, size_from = model_size(plan.config, args.model_size_gb, head)
    limits = Limits(
        model_size=size,
        model_size_from=size_from,
        disk_margin=int(args.disk_margin_gb * GB),
        memory_margin=int(args.memory_margin_gb * GB),
        max_clock_skew=args.max_clock_skew,
    )
    stack = StackRef(pulumi.stack, pulumi.config_file)
    checks = judge(plan, runs, presented, limits, check_flags_too=args.check_flags, stack=stack)
    wall = time.monotonic() - start
    counts = summary(checks)
    ok = counts[FAIL] == 0
    if args.json:
        render.emit_json(
            {
                "ok": ok,
                "stack": pulumi.stack,
                "seconds": round(wall, 2),
                "model_size_bytes": size,
                "model_size_from": size_from,
                "counts": counts,
                "checks": [asdict(c) for c in checks],
            }
        )
    else:
        out = render.console()
        out.print(checks_table(checks, f"preflight: {len(plan.nodes)} nodes, model {plan.model_name}"))
        words = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
        verdict = "ready for `pulumi up`" if ok else "fix the failed checks before `pulumi up`"
        out.print(f"{words} in {wall:.1f} s: {verdict}")
    return 0 if ok else 1
