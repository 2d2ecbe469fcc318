"""Pure: what `spark-llm preflight` runs on a node and how its output reads.

`node_script`: one read-only script a node, one `capture` section per fact (spark_llm.ops.sections), the engine
container's state read by the program's own probe function (spark_llm.plan.observation.ENGINE_STATE_FUNCTION);
then the parsers of those facts (`ip -o link`, `ip -o addr`, `ss`, meminfo, ping, `docker info`, `--help`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from spark_llm.ops.sections import SECTION_FUNCTION, Section
from spark_llm.plan import memory
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.host_record import host_record_command
from spark_llm.plan.observation import ENGINE_STATE_FUNCTION, parse_probe
from spark_llm.plan.router import CONTAINER as ROUTER_CONTAINER
from spark_llm.plan.scripts import bash_lib
from spark_llm.plan.stack import StackPlan
from spark_llm.remote.runner import quote

# Written on every sim node by `sim up` (sim/nodes.py): a node without a GPU on purpose.
SIM_MARKER = "/etc/spark-llm/simulated-node"
GB = 1_000_000_000
# IPv4 + ICMP headers: a ping payload of MTU - 28 bytes fills one packet of the MTU exactly.
PING_OVERHEAD = 28


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


def engine_help_command(plan: DeploymentPlan) -> list[str]:
    return ENGINE_HELP[plan.engine]


# The sections one model's group has of its own on a node (its weights' disk and memory, its engine container, its
# image, its weights' source and its flags); the others are the node's, once for every group.
GROUP_SECTIONS = ("disk", "memory", "engine", "image", "source", "flags")


IMAGE_FORMAT = "{{.Id}} {{.Os}}/{{.Architecture}}"


def group_suffix(plan: DeploymentPlan) -> str:
    """What a group's own section names end with: nothing for the stack's first model, `@<its key>` for another."""
    return "" if plan.unit is None else f"@{plan.unit}"


def group_sections(sections: dict[str, Section], plan: DeploymentPlan) -> dict[str, Section]:
    """A node's sections as one group's checks read them: the node's own, and that group's under their plain names."""
    suffix = group_suffix(plan)
    node = {k: v for k, v in sections.items() if k.partition("@")[0] not in GROUP_SECTIONS}
    own = {
        k.removesuffix(suffix): v
        for k, v in sections.items()
        if k.partition("@")[0] in GROUP_SECTIONS and ("@" in k) == bool(suffix) and k.endswith(suffix)
    }
    return {**node, **own}


def node_script(stack: StackPlan, node: NodePlan, *, check_flags: bool) -> str:
    """The read-only script run on `node`: one `capture` section per fact, the node's once and each group's on it
    under its own names (`group_suffix`). The network's settings are the stack's (any group's plan holds them)."""
    first = stack.first
    payload = first.fabric_mtu - PING_OVERHEAD
    lines = [
        SECTION_FUNCTION + ENGINE_STATE_FUNCTION + _FACT_FUNCTIONS + memory.PROBE_FUNCTION + bash_lib("host_record"),
        "capture docker docker info --format '{{.ServerVersion}} {{.OSType}}/{{.Architecture}}'",
        "capture gpu gpu",
        "capture links ip -o link",
        "capture addrs ip -o addr",
        # The host as the program's probe reads it (spark_llm.plan.host_record): the RoCE devices, their port state
        # and GIDs, /dev/infiniband, judged as preview judges them (spark_llm.plan.fabric_ready).
        f"capture host {host_record_command(first)}",
    ]
    if node.role == "head":
        lines.append("capture ports ss -Hltn")
        if stack.router is not None:
            lines.append(f"capture router docker inspect -f '{{{{.State.Status}}}}' {ROUTER_CONTAINER}")
        for worker in stack.nodes[1:]:
            lines.append(f"capture fabric:{worker.name} ping_mtu {quote(worker.fabric_address)} {payload}")
    else:
        lines.append(f"capture fabric:{first.head.name} ping_mtu {quote(first.head.fabric_address)} {payload}")
    for plan in stack.groups:
        if node.name not in {n.name for n in plan.nodes}:
            continue
        suffix = group_suffix(plan)
        lines += [
            f"MODEL_PATH={quote(plan.model_path)}",
            f"IMAGE_REF={quote(plan.image.ref)}",
            f"CONTAINER={quote(plan.container)}",
            f"capture disk{suffix} disk",
            # The memory admission's own reading (spark_llm.plan.memory): meminfo, the weights' size, GPU processes.
            f"capture memory{suffix} memory_probe {quote(plan.model_path)}",
            f'capture engine{suffix} engine_state "$CONTAINER"',
            f'capture image{suffix} docker image inspect --format {quote(IMAGE_FORMAT)} "$IMAGE_REF"',
        ]
        if node.role != "head":
            continue
        source = plan.model_source
        if source is not None and source.kind == "head" and source.path:
            lines.append(f"capture source{suffix} source_size {quote(source.path)}")
        if check_flags:
            command = " ".join(quote(word) for word in engine_help_command(plan))
            lines.append(f'capture flags{suffix} timeout 300 docker run --rm --network none "$IMAGE_REF" {command}')
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


def router_running(sections: dict[str, Section]) -> bool:
    """The head's router container (spark-llm:router) runs: its port is ours."""
    section = sections.get("router")
    return section is not None and section.ok and section.first_line.strip() == "running"


def engine_running(sections: dict[str, Section]) -> bool:
    """Whether our engine container runs on the node (its `engine` section, the program's probe's reading)."""
    section = sections.get("engine")
    return section is not None and section.ok and parse_probe("", section.body).engine.running


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
