"""Memory admission (pure, standard library only): will a rank's engine fit on its node now, before anything stops?

A DGX Spark's 128 GB is unified: the GPU takes its memory from the OS (~121 GiB usable), and each engine's start
gate judges "free" by one figure of /proc/meminfo (docs: ../shared/notes/real-sparks.md, "Memory"):
- vLLM asks for `--gpu-memory-utilization` (default 0.9) x total, or the weights plus `--kv-cache-memory-bytes`,
  and fails at start when free memory is below it. Before PR #35356 (merged April 2026) "free" on an integrated
  GPU was MemFree, so page cache from the last weights read counted as used (vllm#48140: only `drop_caches`
  helped); 0.24.0 is the first release reported reading MemAvailable there (vllm#48140's own follow-up), so
  older releases are judged by MemFree (at worst stricter than the engine).
- SGLang takes `--mem-fraction-static` x total for the weights and its KV pool and reads MemAvailable on
  integrated GPUs; without the flag it sizes the pool itself from what is left after the weights.
What a node gives now: that figure, plus what this group's own running engine holds (its stop frees it), plus,
with `spark-llm:memory.dropCaches`, the page cache a drop frees. Anything else holding GPU memory is a leftover,
named with its container. The need: the rank's share of the weights (their sizes on the node over the
tensor x pipeline ranks) and the engine's setting. Verdict per node: fits, warn (within WARN_MARGIN), refused,
or unread (a node that could not be read never fits).

In the group's room (standard library only): the supervisor judges a node before each restart with it too.
spark_llm.plan.memory has the probe that prints the sections `parse` reads (scripts/lib/memory.sh).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from spark_llm.group.flags import flag_values

GIB = 1024**3
# The engine's own overhead beyond weights and KV cache (CUDA context, activations, graphs): measured 5.4-6.7 GiB
# per engine on a DGX Spark (llamastash#81).
ENGINE_RESERVE = 6 * GIB
# Within this much of the need a start may still fail (the engine's estimate is not ours): a warning, not a "fits".
WARN_MARGIN = 4 * GIB
# vLLM's default --gpu-memory-utilization (vllm/config/cache.py).
VLLM_DEFAULT_UTILIZATION = 0.9
# The first vLLM release reported judging an integrated GPU's free memory by MemAvailable (vllm#48140).
VLLM_MEMAVAILABLE_SINCE = (0, 24, 0)

FITS, WARN, REFUSED, UNREAD = "fits", "warn", "refused", "unread"

# The probe's sections: `mem-info` (meminfo fields in kB, or `!why`), `mem-weights` (bytes of the weight files
# under model.path), `mem-gpu` (`=PID:MIB:CONTAINER ...`, or `!why` when nvidia-smi cannot be asked).
INFO_SECTION, WEIGHTS_SECTION, GPU_SECTION = "mem-info", "mem-weights", "mem-gpu"
# spark-llm's engine container (spark_llm.config.engine's default takes it from here; `-<model>` beside another
# model): a GPU process in one that is not this group's is another model's engine, not a leftover.
ENGINE_CONTAINERS = "spark-llm-engine"
# ---------- what the engine's setting takes ----------


@dataclass(frozen=True)
class EngineMemory:
    """What an engine's memory setting takes of a node, and the meminfo figure its start gate judges by."""

    engine: str
    gate: str
    """MemFree or MemAvailable."""
    flag: str | None = None
    """The flag that sets it (None: the engine's default)."""
    fraction: float | None = None
    """Of MemTotal (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static)."""
    kv_bytes: int | None = None
    """vLLM --kv-cache-memory-bytes: the weights plus this, instead of a fraction."""

    def setting(self) -> str:
        if self.kv_bytes is not None:
            return f"--kv-cache-memory-bytes {self.kv_bytes}"
        if self.flag is None:
            return "the engine's default (no memory flag)"
        return f"{self.flag} {self.fraction:g}"


def _flag_value(flags: Sequence[str], name: str) -> str | None:
    """The value of `name` in an argv-like list (the last one wins, as argparse's)."""
    return next(reversed(flag_values(flags, [name])), None)


def _size(text: str) -> int:
    """`--kv-cache-memory-bytes` as vLLM reads it: an integer, or with a k/m/g suffix (powers of 1000)."""
    text = text.strip().lower()
    scale = {"k": 10**3, "m": 10**6, "g": 10**9}.get(text[-1:], 1)
    return int(float(text[:-1] if scale != 1 else text) * scale)


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for part in text.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def engine_memory(engine: str, version: str, flags: Sequence[str]) -> EngineMemory:
    """Pure: the memory setting `flags` give `engine` at `version`."""
    if engine == "vllm":
        gate = "MemAvailable" if _version(version) >= VLLM_MEMAVAILABLE_SINCE else "MemFree"
        kv = _flag_value(flags, "--kv-cache-memory-bytes")
        if kv is not None:
            return EngineMemory(engine, gate, "--kv-cache-memory-bytes", kv_bytes=_size(kv))
        util = _flag_value(flags, "--gpu-memory-utilization")
        return EngineMemory(
            engine,
            gate,
            "--gpu-memory-utilization",
            float(util) if util is not None else VLLM_DEFAULT_UTILIZATION,
        )
    fraction = _flag_value(flags, "--mem-fraction-static")
    if fraction is None:
        return EngineMemory(engine, "MemAvailable")
    return EngineMemory(engine, "MemAvailable", "--mem-fraction-static", float(fraction))


def rank_weights(weights_bytes: int, tensor_parallel: int, pipeline_parallel: int = 1) -> int:
    """Pure: one rank's share of the weights (each rank holds 1/(tp x pp) of them)."""
    return math.ceil(weights_bytes / max(tensor_parallel * pipeline_parallel, 1))


def rank_need(setting: EngineMemory, share: int, total: int) -> tuple[int, str]:
    """Pure: what one rank takes of a node of MemTotal `total` (bytes), and how, in words."""
    if setting.kv_bytes is not None:
        need = share + setting.kv_bytes + ENGINE_RESERVE
        return need, f"weights {gib(share)} + KV {gib(setting.kv_bytes)} + engine {gib(ENGINE_RESERVE)}"
    if setting.fraction is not None:
        return math.ceil(setting.fraction * total), f"{setting.flag} {setting.fraction:g} x {gib(total)}"
    took = f"weights {gib(share)} + engine {gib(ENGINE_RESERVE)} (the engine sizes its KV cache from the rest)"
    return share + ENGINE_RESERVE, took


# ---------- what a node gives ----------


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    used: int
    """Bytes (nvidia-smi's used_memory, MiB)."""
    container: str
    """Its container's name ("" when it runs on the host)."""


@dataclass(frozen=True)
class NodeMemory:
    """One node's memory as the probe read it."""

    node: str
    error: str | None = None
    """Why it could not be read (None: it was)."""
    meminfo: Mapping[str, int] | None = None
    """Bytes per /proc/meminfo field (MemTotal, MemFree, MemAvailable, Active(file), Inactive(file))."""
    weights: int | None = None
    """Bytes of the weight files on the node (None: not there yet)."""
    gpu: tuple[GpuProcess, ...] = ()
    gpu_error: str | None = None
    """Why the processes holding GPU memory are unknown (no nvidia-smi, or it failed)."""

    @property
    def reclaimable(self) -> int:
        """The page cache a drop frees: the file LRU lists (what MemAvailable's estimate also counts)."""
        info = self.meminfo or {}
        return info.get("Active(file)", 0) + info.get("Inactive(file)", 0)


def parse(node: str, facts: Mapping[str, str]) -> NodeMemory:
    """Pure: the probe's sections (scripts/lib/memory.sh) of one node -> what it gives."""
    info_text = facts.get(INFO_SECTION)
    if info_text is None:
        return NodeMemory(node, error="the memory probe printed nothing")
    if info_text.startswith("!"):
        return NodeMemory(node, error=info_text[1:].strip() or "cannot read /proc/meminfo")
    meminfo = {}
    for field in info_text.split():
        name, _, kb = field.partition("=")
        if kb.isdigit():
            meminfo[name] = int(kb) * 1024
    missing = [f for f in ("MemTotal", "MemFree", "MemAvailable") if f not in meminfo]
    if missing:
        return NodeMemory(node, error=f"/proc/meminfo has no {', '.join(missing)}")
    weights_text = facts.get(WEIGHTS_SECTION, "")
    weights = int(weights_text) if weights_text.isdigit() else None
    gpu_text = facts.get(GPU_SECTION, "!not read")
    processes: list[GpuProcess] = []
    gpu_error = None
    if gpu_text.startswith("!"):
        gpu_error = gpu_text[1:].strip()
    else:
        for entry in gpu_text.lstrip("=").split():
            pid, _, rest = entry.partition(":")
            mib, _, container = rest.partition(":")
            if pid.isdigit() and mib.isdigit():
                processes.append(GpuProcess(int(pid), int(mib) * 1024**2, "" if container == "-" else container))
    return NodeMemory(node, meminfo=meminfo, weights=weights, gpu=tuple(processes), gpu_error=gpu_error)


# ---------- the verdict ----------


@dataclass(frozen=True)
class Admission:
    """One node's verdict, with the numbers and the fix in words."""

    node: str
    verdict: str
    """fits, warn, refused or unread."""
    detail: str
    fix: str = ""
    need: int = 0
    available: int = 0

    @property
    def blocks(self) -> bool:
        """Whether a start must not go ahead (refused, or not read)."""
        return self.verdict in (REFUSED, UNREAD)

    def line(self) -> str:
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"memory admission {self.node}: {self.verdict}: {self.detail}{fix}"


def gib(n: float) -> str:
    """Bytes in GiB (in MiB below a tenth of one: a small model's share would read 0.0)."""
    return f"{n / GIB:.1f} GiB" if abs(n) >= GIB / 10 or n == 0 else f"{n / 1024**2:.1f} MiB"


def judge(
    seen: NodeMemory,
    setting: EngineMemory,
    *,
    ranks: int,
    own_container: str,
    drop_caches: bool,
    weights_bytes: int | None = None,
) -> Admission:
    """Pure: will this node's rank fit now?

    `ranks`: tensor x pipeline ranks the weights are split over; `own_container`: this group's engine container
    (its memory comes back when the group stops it); `weights_bytes`: the model's size when known otherwise (e.g.
    the weights manifest), else the files the probe found on the node.
    """
    if seen.error is not None or seen.meminfo is None:
        return Admission(seen.node, UNREAD, f"cannot read its memory: {seen.error}", "make the node readable over ssh")
    info = seen.meminfo
    total = info["MemTotal"]
    weights = weights_bytes if weights_bytes is not None else seen.weights
    share = rank_weights(weights, ranks) if weights is not None else 0
    need, took = rank_need(setting, share, total)
    weights_said = (
        f"its weights share {gib(share)} (1/{ranks} of {gib(weights)})"
        if weights is not None
        else "its weights not on the node yet (not counted)"
    )
    # What the node gives: the gate's figure, what our own engine frees when it stops, the page cache a drop frees.
    own = sum(p.used for p in seen.gpu if p.container == own_container)
    leftovers = [p for p in seen.gpu if p.container != own_container]
    figure = info[setting.gate]
    cache = seen.reclaimable if (drop_caches and setting.gate == "MemFree") else 0
    available = figure + own + cache
    gives = f"{setting.gate} {gib(figure)}"
    if own:
        gives += f" + {gib(own)} our engine frees"
    if cache:
        gives += f" + {gib(cache)} page cache dropped"
    detail = f"needs {gib(need)} ({took}; {weights_said}), has {gib(available)} ({gives}) of {gib(total)}"
    if leftovers:
        detail += "; held by others: " + ", ".join(_process(p) for p in leftovers)
    elif seen.gpu_error:
        detail += f"; GPU processes not read: {seen.gpu_error}"
    fixes: list[str] = []
    if setting.fraction is not None and share + ENGINE_RESERVE > need:
        # The setting's budget cannot even hold the weights: no room for a KV cache, whatever the node has free.
        fixes.append(f"raise {setting.flag} or spread the weights over more ranks (tensor or pipeline parallel)")
        return Admission(
            seen.node,
            REFUSED,
            f"{weights_said} + engine {gib(ENGINE_RESERVE)} exceeds what {took} = {gib(need)} leaves the engine; "
            + detail,
            "; ".join(fixes),
            need,
            available,
        )
    if available >= need + WARN_MARGIN:
        return Admission(seen.node, FITS, detail, "", need, available)
    if not drop_caches and setting.gate == "MemFree" and seen.reclaimable:
        fixes.append(
            f"drop the page cache ({gib(seen.reclaimable)}) before the start:"
            " `pulumi config set --path spark-llm:memory.dropCaches true`"
        )
    for p in leftovers:
        if p.container.startswith(ENGINE_CONTAINERS):
            # Another model's engine of this stack (spark-llm:models), or another stack's: nothing left over to stop.
            fixes.append(
                f"make room beside {p.container} ({gib(p.used)}), another spark-llm engine on {seen.node}: lower its"
                " model's or this model's memory setting, or move one of them to another node"
            )
            continue
        where = f" in container {p.container}" if p.container else " on the host"
        fixes.append(f"stop the leftover process {p.pid}{where} ({gib(p.used)})")
    lower = lower_setting(setting, available, share, total)
    if lower:
        fixes.append(lower)
    verdict = WARN if available >= need else REFUSED
    if verdict == WARN:
        detail = f"within {gib(WARN_MARGIN)} of its need: " + detail
    return Admission(seen.node, verdict, detail, "; ".join(fixes), need, available)


def _process(p: GpuProcess) -> str:
    return f"pid {p.pid} ({p.container or 'host'}) {gib(p.used)}"


def lower_setting(setting: EngineMemory, available: int, share: int, total: int, whose: str = "") -> str:
    """The setting lowered to what the node gives (with the warn margin), when that still holds the weights.

    `whose`: the model it is said of (`embed's `), where a node holds several."""
    room = available - WARN_MARGIN
    if setting.fraction is not None:
        value = math.floor(room / total * 100) / 100
        if value > 0 and value * total >= share + ENGINE_RESERVE:
            return f"lower {whose}{setting.flag} to {value:.2f}"
    elif setting.kv_bytes is not None:
        kv = room - share - ENGINE_RESERVE
        if kv > GIB:
            return f"lower {whose}--kv-cache-memory-bytes to {kv // GIB}g"
    return ""


# ---------- before the supervisor's restart ----------

# What the supervisor asks a worker for its memory (scripts/supervisor_allow.sh allows it word for word and prints
# the `mem-info` and `mem-gpu` sections, as the probe does).
MEMORY_REQUEST = "spark-llm memory"


class MemorySpec(TypedDict):
    """How the supervisor judges a node's memory before a restart (spark_llm.plan.supervisor writes it)."""

    engine: str
    version: str
    flags: list[str]
    container: str
    ranks: int


def info_section(meminfo: str) -> str:
    """/proc/meminfo's text -> the probe's `mem-info` value (what the head's supervisor reads from its mount)."""
    fields = []
    for line in meminfo.splitlines():
        name, _, rest = line.partition(":")
        if name in ("MemTotal", "MemFree", "MemAvailable", "Active(file)", "Inactive(file)") and rest.split():
            fields.append(f"{name}={rest.split()[0]}")
    return " ".join(fields) if fields else "!no MemTotal in /proc/meminfo"


def restart_held(readings: Sequence[tuple[str, Mapping[str, str], bool]], spec: MemorySpec) -> str | None:
    """Why the supervisor must not restart the group into its nodes' memory now (None: it may).

    `readings`: each node's probe sections and whether this group's engine still runs there. Such a node is not
    judged: the restart stops that engine first and its memory comes back (the supervisor cannot tell how much on
    the head, where it has no nvidia-smi). The weights' size is not read (their share is within the engine's
    setting, which `pulumi up` admitted); no page cache is dropped by a restart, so none is counted.
    """
    setting = engine_memory(spec["engine"], spec["version"], spec["flags"])
    refusals = []
    for node, sections, ours_runs in readings:
        if ours_runs:
            continue
        got = judge(parse(node, sections), setting, ranks=spec["ranks"], own_container=spec["container"],
                    drop_caches=False)  # fmt: skip
        if got.blocks:
            refusals.append(got.line())
    if not refusals:
        return None
    return "; ".join(refusals) + " (no restart until it fits: fix it, or `pulumi up` after the fix)"
