"""Pure: the host as it was when it last worked, and what changed since.

At every start that served, the readiness gate records each node's host (scripts/lib/host_record.sh: kernel, NVIDIA
driver, CUDA, each fabric interface's MTU and NIC driver/firmware, the RoCE devices with their port state and GIDs,
Docker and the NVIDIA container runtime, the engine's image; and the NCCL version the engine loaded, from its log) in
the start's record (spark_llm.group.history.StartRecord `hosts`). `pulumi preview`, `up` and `spark-llm status`
compare each node as it is now with it and name what changed (node, field, old -> new): a kernel or driver update is
what breaks RDMA registration (eugr/spark-vllm-docker#392: `ibv_reg_mr_iova2` ENOMEM after kernel 7.0.0-1019), and a
failed start's error repeats it. The same fields, read now, say whether the fabric is ready for a start
(spark_llm.plan.fabric_ready).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_llm.group.fabric_ready import ABSENT, FIELD_PREFIX, fields_from
from spark_llm.group.history import HostFields, StartRecord
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.scripts import bash_lib

HOST_PREFIX = FIELD_PREFIX
LAST_SERVED_SECTION = "last_served_hosts"
# The fields every record names, in the order people read them (absent ones say so); per-interface and per-device
# fields (`mtu.IF`, `nic_driver.IF`, `nic_firmware.IF`, `port_state.DEV`, `gids.DEV`) follow.
FIELDS = (
    "kernel",
    "nvidia_driver",
    "cuda",
    "nccl",
    "roce_devices",
    "verbs_devices",
    "docker",
    "nvidia_container_runtime",
    "image",
)
# Read from the engine's log, not from the host: the probe cannot say it now (compared only at the next start).
FROM_ENGINE_LOG = ("nccl",)
# The engine container's: absent now only means no container (destroyed, or not started yet), not a changed host.
OF_THE_CONTAINER = ("image",)
# Per-device fields recorded since issue 41: a record made before has none, which is not a change (a device that came
# since is named by `roce_devices`).
NOT_IN_OLDER_RECORDS = ("port_state.",)
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_VLLM_NCCL = re.compile(r"vLLM is using nccl==(\S+)")


def host_record_command(plan: DeploymentPlan) -> str:
    """The call of bash_lib host_record for this plan's container and fabric interfaces (its function defined)."""
    return "host_record " + " ".join(shlex.quote(a) for a in (plan.container, *plan.fabric_interfaces))


def host_probe(plan: DeploymentPlan) -> str:
    """Read-only bash a node runs to print its `host.FIELD<TAB>VALUE` lines (bash_lib host_record)."""
    return bash_lib("host_record") + host_record_command(plan) + "\n"


def last_served_probe(path: str) -> str:
    """Read-only bash on the head: `last_served_hosts<TAB>JSON`, the hosts of the latest start that served."""
    found = f"grep -F '\"hosts\": {{' {shlex.quote(path)} 2>/dev/null | grep -vF '\"failed\":' | tail -n 1"
    return f'if line=$({found}) && [ -n "$line" ]; then\n  printf "{LAST_SERVED_SECTION}\\t%s\\n" "$line"\nfi\n'


def host_fields(facts: dict[str, str]) -> HostFields:
    """A probe's `host.*` sections -> the node's fields (absent ones named ABSENT)."""
    found = {k[len(HOST_PREFIX) :]: v for k, v in facts.items() if k.startswith(HOST_PREFIX)}
    return {**{f: ABSENT for f in FIELDS if f not in FROM_ENGINE_LOG}, **found}


def parse_host_lines(text: str) -> HostFields:
    """What `host_probe` printed -> the node's fields (absent ones named ABSENT)."""
    return {**{f: ABSENT for f in FIELDS if f not in FROM_ENGINE_LOG}, **fields_from(text)}


def engine_nccl(log: str) -> str:
    """The NCCL version the engine loaded, from its log (NCCL's own line, or vLLM's), or ABSENT."""
    versions = _NCCL_VERSION.findall(log) or _VLLM_NCCL.findall(log)
    return versions[-1] if versions else ABSENT


def last_served(text: str | None) -> StartRecord | None:
    """The `last_served_hosts` line's record (None without one)."""
    try:
        value = json.loads(text or "")
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("hosts"), dict):
        return value  # type: ignore[return-value]
    return None


@dataclass(frozen=True)
class HostChange:
    node: str
    field: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.node}: {self.field} {self.old} -> {self.new}"


def host_changes(recorded: dict[str, HostFields], now: dict[str, HostFields]) -> list[HostChange]:
    """What differs between each node's recorded host and now, node by node (fields read now only: the NCCL version
    comes from an engine's log)."""
    changes = []
    for node, fields in now.items():
        before = recorded.get(node)
        if not before:
            continue
        for field in sorted(set(before) | set(fields)):
            if field in FROM_ENGINE_LOG:
                continue
            if field not in before and field.startswith(NOT_IN_OLDER_RECORDS):
                continue
            old, new = before.get(field, ABSENT), fields.get(field, ABSENT)
            if field in OF_THE_CONTAINER and new == ABSENT:
                continue
            if old != new:
                changes.append(HostChange(node, field, old, new))
    return changes


def changes_warning(changes: list[HostChange], at: str) -> str:
    """What preview, up, status and a failed start say of the changes since the last start that served."""
    listed = "; ".join(str(c) for c in changes)
    return (
        f"the hosts changed since the last start that served ({at}): {listed}. A kernel, driver or firmware update can"
        " break the fabric (RDMA registration fails after some kernel updates: eugr/spark-vllm-docker#392); if the"
        " group fails to start, this is the first suspect."
    )


def fingerprint_lines(record: Mapping[str, Any]) -> list[str]:
    """The recorded hosts of a start (a StartRecord, or the `start_timeline` output) as a user reads them
    (`spark-llm status --hosts`, docs/real-sparks.md)."""
    hosts = record.get("hosts") or {}
    lines = [f"hosts at the last start that served ({record.get('at', '?')}):"]
    for node, fields in hosts.items():
        lines.append(f"  {node}:")
        ordered = [f for f in FIELDS if f in fields] + sorted(f for f in fields if f not in FIELDS)
        lines += [f"    {field}: {fields[field]}" for field in ordered]
    return lines
