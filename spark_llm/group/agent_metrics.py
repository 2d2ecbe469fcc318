"""What only spark-llm knows, as Prometheus metrics: the textfile the head's agent writes for the node exporter's
textfile collector (issue 42, item 2): each group's state, its restarts and the budget left, each rank's NCCL
transport, each node's host drift and GPU readings (nvidia-smi --query-gpu: DCGM's memory fields do not work on
GB10's unified memory), the last start's phases, and when the agent last wrote (a silent agent is an alert too).

The names are the ones spark_llm.plan.monitoring.rules reads: they live here, once. Rendering is pure; `write`
replaces the file in one rename, so the collector never reads half of it. Standard library only (the group's room).
The supervisor writes it every poll while spark-llm:monitoring is on (its spec's `textfile`): `group_reading` is
what one group's watch knows, read from its state and the head's history of starts.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field

from spark_llm.group.verdict import BROKEN, WAIT, WHOLE

# Where the agent writes (its container's mount of the head's textfile directory, which the head's exporter reads).
CONTAINER_TEXTFILE_DIR = "/run/spark-llm/textfile"
TEXTFILE_NAME = "spark-llm.prom"

GROUP_STATE = "spark_llm_group_state"
RESTARTS = "spark_llm_group_restarts_total"
BUDGET_LEFT = "spark_llm_group_restart_budget_left"
NCCL_TRANSPORT = "spark_llm_nccl_transport"
START_PHASE = "spark_llm_start_phase_seconds"
HOST_DRIFT = "spark_llm_host_drift"
GPU_POWER = "spark_llm_gpu_power_watts"
GPU_TEMPERATURE = "spark_llm_gpu_temperature_celsius"
GPU_SM_CLOCK = "spark_llm_gpu_sm_clock_hertz"
# Written by each node's writer beside the GPU's readings (scripts/lib/gpu_readings.sh), labelled by weights path.
WEIGHTS_DISK_FREE = "spark_llm_weights_disk_free_bytes"
WEIGHTS_DISK_SIZE = "spark_llm_weights_disk_size_bytes"
LAST_WRITE = "spark_llm_agent_last_write_timestamp_seconds"

# name -> (type, help)
FAMILIES = {
    GROUP_STATE: ("gauge", "1 for the group's state as the head's agent judged it last (whole, broken, wait, gave_up)"),
    RESTARTS: ("counter", "Restarts the head's agent made of the group since it started"),
    BUDGET_LEFT: ("gauge", "Restarts left in the supervisor's budget window"),
    NCCL_TRANSPORT: ("gauge", "1 for the transport each rank's NCCL chose at the group's last start (IB or Socket)"),
    START_PHASE: ("gauge", "How long each start phase took on each node at the group's last start"),
    HOST_DRIFT: ("gauge", "1 when the node's host differs from what the last start that served recorded"),
    GPU_POWER: ("gauge", "GPU power draw (nvidia-smi power.draw)"),
    GPU_TEMPERATURE: ("gauge", "GPU temperature (nvidia-smi temperature.gpu)"),
    GPU_SM_CLOCK: ("gauge", "GPU SM clock (nvidia-smi clocks.sm)"),
    LAST_WRITE: ("gauge", "When the head's agent last wrote this file (Unix time)"),
}
# The group's verdicts as spark_llm.group.verdict names them, and the supervisor's own end of the road.
GAVE_UP = "gave_up"
STATES = (WHOLE, BROKEN, WAIT, GAVE_UP)


@dataclass(frozen=True)
class GroupReading:
    """One model's group as the agent knows it."""

    model: str
    state: str
    restarts: int
    budget_left: int
    transports: tuple[tuple[int, str, str], ...] = ()
    """(rank, node, transport) from the last start's fabric proof."""
    phases: tuple[tuple[str, str, float], ...] = ()
    """(node, phase, seconds) from the last start's timeline."""


@dataclass(frozen=True)
class NodeReading:
    """One node: its host drift and its GPU (None where it could not be read)."""

    node: str
    drift: bool | None = None
    gpu_power_watts: float | None = None
    gpu_temperature_celsius: float | None = None
    gpu_sm_clock_mhz: float | None = None


@dataclass
class _Samples:
    lines: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in FAMILIES})

    def add(self, name: str, labels: dict[str, str], value: float) -> None:
        self.lines[name].append(f"{name}{_labels(labels)} {_number(value)}")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}" if labels else ""


def _number(value: float) -> str:
    return repr(float(value))


def render(groups: list[GroupReading], nodes: list[NodeReading], now: float) -> str:
    """The textfile: every family's HELP and TYPE, then its samples (a family with none keeps its header)."""
    out = _Samples()
    for group in groups:
        model = {"model": group.model}
        for state in STATES:
            out.add(GROUP_STATE, {**model, "state": state}, 1 if group.state == state else 0)
        out.add(RESTARTS, model, group.restarts)
        out.add(BUDGET_LEFT, model, group.budget_left)
        for rank, name, transport in group.transports:
            out.add(NCCL_TRANSPORT, {**model, "rank": str(rank), "node": name, "transport": transport}, 1)
        for name, phase, seconds in group.phases:
            out.add(START_PHASE, {**model, "node": name, "phase": phase}, seconds)
    for reading in nodes:
        node = {"node": reading.node}
        if reading.drift is not None:
            out.add(HOST_DRIFT, node, 1 if reading.drift else 0)
        if reading.gpu_power_watts is not None:
            out.add(GPU_POWER, node, reading.gpu_power_watts)
        if reading.gpu_temperature_celsius is not None:
            out.add(GPU_TEMPERATURE, node, reading.gpu_temperature_celsius)
        if reading.gpu_sm_clock_mhz is not None:
            out.add(GPU_SM_CLOCK, node, reading.gpu_sm_clock_mhz * 1e6)  # Prometheus's base unit
    out.add(LAST_WRITE, {}, now)
    text: list[str] = []
    for name, (kind, help_text) in FAMILIES.items():  # text format 0.0.4: a counter's lines name it with _total
        text += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *out.lines[name]]
    return "\n".join(text) + "\n"


def write(directory: str, name: str, text: str) -> None:
    """Replace DIRECTORY/NAME with `text` in one rename (the collector reads *.prom files: the temporary one is not)."""
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def group_reading(
    model: str, state: str, restarts: int, budget_left: int, members: list[str], last_start: dict | None
) -> GroupReading:
    """One group's reading: `members` in rank order (head first), `last_start` the newest line of the head's history
    of starts (spark_llm.group.history: its `fabric` and its `nodes` timeline), None before any."""
    start = last_start or {}
    fabric = start.get("fabric") or {}
    transports = tuple(
        (rank, name, str(fabric[name].get("transport", "unknown")))
        for rank, name in enumerate(members)
        if name in fabric
    )
    phases = tuple(
        (name, str(phase.get("phase")), float(phase.get("seconds") or 0))
        for name, timeline in sorted((start.get("nodes") or {}).items())
        for phase in timeline
        if isinstance(phase, dict)
    )
    return GroupReading(model, state, restarts, budget_left, transports, phases)
