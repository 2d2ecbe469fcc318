"""Which start phase an engine node is in, read from its log lines: a start you can watch, and a stall you can name.

Pure: the caller hands in the lines it read (with the time it received each), this module says which phase the node
is in, since when, and how long each finished phase took. The phases and their lines are the real engines' (the
source file of each shape: sim/engine/standin_engine/start_phases.py, whose stand-in prints the same lines, and
tests/unit/plan/start/test_start_phases.py, which feeds both the real lines and the stand-in's output through here).

How a log becomes phases (one track a node, only forward):
- every line of a phase marks the node as in that phase; its end line ends it, and the next phase begins right
  there (several phases have no begin line of their own: vLLM's KV-cache profile begins when torch.compile ends);
- a phase that gets no line of its own before a later phase's line was skipped (vLLM --enforce-eager: no compile,
  no graph) and its time counts to the later phase;
- a line of the phase just ended, before the next phase printed anything, reopens it (SGLang captures one CUDA graph
  set after another; vLLM logs the KV cache size after the first KV line);
- any other line of an earlier phase (a slower rank's, in a log that carries several) only counts as a new line.
Times are the engine's own where the line has one (SGLang `[2026-02-26 05:20:19 TP0]`, vLLM `INFO 05-01 17:08:53`,
or a `docker logs -t` prefix), else the caller's receive time. Engine clocks are read as UTC unless the caller says
otherwise (a container's clock is UTC unless its TZ is set).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from spark_llm.group.times import seconds, split_stamp

# The program's engine profiles (spark_llm/plan/engines/) and the engine whose lines each one's nodes print.
PROFILE_ENGINES = {"sglang": "sglang", "vllm-native": "vllm", "vllm-ray": "vllm"}


@dataclass(frozen=True)
class PhaseSpec:
    """One start phase: its name (the stand-in's knobs use the same), a title, and how to judge a stall in it."""

    name: str
    title: str
    stall_seconds: float
    """Default bound: this long without a new log line in this phase is suspicious (history may set a better one)."""
    stall_hint: str
    """What usually causes a stall here, for the error that ends the wait."""


_DIST_INIT_HINT = (
    "every node must reach the rendezvous over the fabric: check that NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME name "
    "the interface that carries the fabric address on every node, the same MTU on both ends of the link (jumbo frames "
    "everywhere or nowhere), a firewall that drops the rendezvous port or NCCL's ephemeral ports, and that every "
    "node's engine started at all (its own log)"
)
_RAY_HINT = "; with Ray, `ray status` on the head shows which nodes joined and whether the placement group has GPUs"
_KV_HINT = (
    "the KV-cache profile runs a forward pass on every rank with collectives: a hang here is usually a collective "
    "stuck as in distributed init, or memory pressure (lower {memory_flag})"
)
_SERVER_HINT = (
    "the engine finished but its HTTP server did not come up: a port already in use, the tokenizer or chat template "
    "loading, or the warm-up request failing (its last lines say which)"
)
# Bounds are generous on purpose: a false stall kills a healthy start. Weights and graph capture are the long ones
# on a 100-120 GB model: reading it takes minutes from a local NVMe and far longer from a network share or the hub
# (both engines print only a progress bar meanwhile), and CUDA-graph capture of many batch sizes across two nodes
# has taken several minutes on Sparks, with NCCL traffic at each size.
_SGLANG = (
    PhaseSpec("dist_init", "distributed init", 600.0, _DIST_INIT_HINT),
    PhaseSpec(
        "weights",
        "weight loading",
        1800.0,
        "reading the weights: a slow or stalled disk or network share, a download from the hub (set HF_HUB_OFFLINE=1 "
        "with a local copy), or the page cache and swap thrashing on a model near the node's memory",
    ),
    PhaseSpec("kv_cache", "KV cache", 600.0, _KV_HINT.format(memory_flag="--mem-fraction-static")),
    PhaseSpec(
        "graph",
        "CUDA graph capture",
        1800.0,
        "CUDA-graph capture across nodes is known to hang: try --disable-cuda-graph, or capture fewer batch sizes "
        "(--cuda-graph-max-bs, --cuda-graph-max-bs-decode from 0.5.17)",
    ),
    PhaseSpec("server", "HTTP server", 300.0, _SERVER_HINT),
)
_VLLM = (
    _SGLANG[0],
    _SGLANG[1],
    PhaseSpec(
        "compile",
        "torch.compile",
        1200.0,
        "torch.compile without a cache takes minutes and prints little; a stall is usually a compile worker stuck "
        "or starved of CPU: --enforce-eager skips it (and graph capture), or keep the cache between starts "
        "(~/.cache/vllm)",
    ),
    PhaseSpec("kv_cache", "KV cache profile", 600.0, _KV_HINT.format(memory_flag="--gpu-memory-utilization")),
    PhaseSpec(
        "graph",
        "CUDA graph capture",
        1800.0,
        "CUDA-graph capture across nodes is known to hang: try --enforce-eager, or capture fewer sizes "
        "(--max-cudagraph-capture-size, 0.16 and later)",
    ),
    PhaseSpec("server", "API server", 300.0, _SERVER_HINT),
)


def phases_for(profile: str, *, head: bool = True) -> tuple[PhaseSpec, ...]:
    """The phases a node of this profile goes through, in order; a vLLM node other than the head serves no API."""
    engine = _engine(profile)
    if engine == "sglang":
        return _SGLANG
    phases = tuple(
        replace(spec, stall_hint=spec.stall_hint + _RAY_HINT)
        if profile == "vllm-ray" and spec.name == "dist_init"
        else spec
        for spec in _VLLM
    )
    return phases if head else phases[:-1]


def _engine(profile: str) -> str:
    try:
        return PROFILE_ENGINES[profile]
    except KeyError:
        raise ValueError(f"unknown engine profile {profile!r}; known: {', '.join(PROFILE_ENGINES)}") from None


# Each engine's lines: (pattern, phase, ends the phase). First match wins; a group, if any, is the engine's own
# count of the phase's seconds. Shapes and source files: sim/engine/standin_engine/start_phases.py.
_Marker = tuple[re.Pattern[str], str, bool]


def _markers(*rows: tuple[str, str, bool]) -> tuple[_Marker, ...]:
    return tuple((re.compile(pattern), phase, ends) for pattern, phase, ends in rows)


_SGLANG_LINES = _markers(
    (r"Init torch distributed begin\.", "dist_init", False),
    (r"Init torch distributed ends\.(?: elapsed=([\d.]+) s)?", "dist_init", True),
    (r"Load weight begin\.", "weights", False),
    (r"Load weight end\.(?: elapsed=([\d.]+) s)?", "weights", True),
    (r"Loading safetensors checkpoint shards", "weights", False),
    (r"(?:KV|Mamba) Cache is allocated\.", "kv_cache", False),
    (r"Memory pool end\.", "kv_cache", True),
    (r"Capture cuda graph end\. Time elapsed: ([\d.]+) s", "graph", True),
    (r"Capture [\w ]*CUDA graph end\. elapsed=([\d.]+) s", "graph", True),
    (r"Capture [\w ]*(?:cuda|CUDA) graph|Capturing batches", "graph", False),
    (
        r"max_total_num_tokens=|INFO: +(?:Started server process|Waiting for application|Application startup|Uvicorn)",
        "server",
        False,
    ),
    (r"The server is fired up and ready to roll!|[Dd]ummy health check server", "server", True),
)
_VLLM_LINES = _markers(
    (r"world_size=\d+ rank=\d+ local_rank=\d+ distributed_init_method=", "dist_init", False),
    (
        r"Waiting for creating a placement group|Connect(?:ing|ed) to (?:an existing |the )?Ray cluster|"
        r"GPUs in the Ray cluster|Ray group ranks",
        "dist_init",
        False,
    ),
    (r"rank \d+ in world size \d+ is assigned as", "dist_init", True),
    (r"Starting to load model |Loading weights took|Loading safetensors checkpoint shards", "weights", False),
    (r"Model loading took [\d.]+ GiB (?:memory )?and ([\d.]+) ?s", "weights", True),
    (
        r"for vLLM's torch\.compile|Dynamo bytecode transform time|Compiling a graph for|compiled graph|"
        r"Cache the graph ",
        "compile",
        False,
    ),
    (r"torch\.compile takes ([\d.]+) s in total", "compile", True),
    # The engine core's summary closes the KV-cache profile again (reopened) when no graph was captured (eager);
    # after a capture it is a late line and changes nothing.
    (
        r"Available KV cache memory:|GPU KV cache size:|Maximum concurrency for |"
        r"init engine \(profile, create kv cache, warmup model\) took",
        "kv_cache",
        True,
    ),
    (r"Capturing CUDA graphs", "graph", False),
    (r"Graph capturing finished in ([\d.]+) secs?", "graph", True),
    (
        r"Starting vLLM (?:API )?server|Supported tasks|Available routes|Route: |"
        r"INFO: +(?:Started server process|Waiting for application)",
        "server",
        False,
    ),
    (r"INFO: +Application startup complete\.", "server", True),
)
_LINES = {"sglang": _SGLANG_LINES, "vllm": _VLLM_LINES}

_SGLANG_TIME = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})[\] ]")
_VLLM_TIME = re.compile(r"(?:^|\) )(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d{2}-\d{2} \d{2}:\d{2}:\d{2}) \[")


@dataclass(frozen=True)
class LogLine:
    """One line of a node's log and when the caller first received it (seconds since the epoch).

    Keep a line's first receive time across polls: a log read again whole must not look fresh, or no stall shows.
    Lines from `docker logs -t` carry the time the container wrote them, which is used instead.
    """

    text: str
    received: float


@dataclass(frozen=True)
class FinishedPhase:
    name: str
    started: float
    ended: float
    engine_seconds: float | None = None
    """The engine's own count where its end line has one (`Loading weights took`, `elapsed=`): finer than the
    whole seconds of its timestamps."""

    @property
    def seconds(self) -> float:
        return max(self.ended - self.started, 0.0)


@dataclass(frozen=True)
class NodeStart:
    """Where one node's start is: its current phase and since when, the phases it finished, its last line."""

    profile: str
    phases: tuple[PhaseSpec, ...]
    phase: str | None
    """The current phase; None before the first phase line and once the start is done."""
    since: float | None
    done: bool
    finished: tuple[FinishedPhase, ...]
    last_line: str | None
    last_line_at: float | None
    """When the last line was received (not the engine's time: this is what a stall is measured against)."""

    @property
    def spec(self) -> PhaseSpec | None:
        """The current phase's spec (bound and hint)."""
        return next((spec for spec in self.phases if spec.name == self.phase), None)

    def timeline(self) -> dict[str, float]:
        """Seconds per finished phase, in start order."""
        return {phase.name: phase.seconds for phase in self.finished}

    def in_phase_for(self, now: float) -> float | None:
        return None if self.since is None else max(now - self.since, 0.0)

    def silent_for(self, now: float) -> float | None:
        """Seconds since the last line arrived."""
        return None if self.last_line_at is None else max(now - self.last_line_at, 0.0)

    def stalled(self, now: float, bound: float | None = None) -> bool:
        """Whether the current phase went longer than `bound` (default: its spec's) without a new line."""
        spec, silent = self.spec, self.silent_for(now)
        if spec is None or silent is None:
            return False
        return silent > (spec.stall_seconds if bound is None else bound)


@dataclass
class _Track:
    order: tuple[str, ...]
    current: int = -1  # index into order; len(order) when done
    since: float | None = None
    own_lines: bool = False
    reported: float | None = None
    finished: list[FinishedPhase] = field(default_factory=list)

    def line(self, index: int, ends: bool, at: float, reported: float | None) -> None:
        if self.current == -1:
            self.current, self.since = index, at
        elif index > self.current:
            if self.own_lines and self.current < len(self.order):
                self._finish(at)
            self.current = index  # phases between had no line: skipped, their time counts to this one
        elif index < self.current:
            last = self.finished[-1] if self.finished else None
            if (
                self.own_lines
                or self.current >= len(self.order)
                or last is None
                or self.order.index(last.name) != index
            ):
                return  # a slower rank's or a repeated line: it counts as a line, not as a step back
            self.finished.pop()  # the phase just ended goes on (another capture set, the KV cache size)
            self.current, self.since, self.reported = index, last.started, last.engine_seconds
        self.own_lines = True
        if reported is not None:
            self.reported = (self.reported or 0.0) + reported
        if ends:
            self._finish(at)

    def _finish(self, at: float) -> None:
        assert self.since is not None
        self.finished.append(FinishedPhase(self.order[self.current], self.since, at, self.reported))
        self.current, self.since, self.own_lines, self.reported = self.current + 1, at, False, None


def read_start(
    profile: str, lines: Iterable[LogLine], *, head: bool = True, engine_utc_offset_seconds: float = 0.0
) -> NodeStart:
    """Read one node's start from its log lines, oldest first.

    `head`: rank 0 (a vLLM node other than the head runs no API server, so its start ends with graph capture; a
    vllm-ray worker's own log is only `ray start`'s: its phases are in the head's log). `engine_utc_offset_seconds`:
    how far the engine's clock is ahead of UTC (0 for a container without TZ).
    """
    phases = phases_for(profile, head=head)
    order = tuple(spec.name for spec in phases)
    markers = tuple(marker for marker in _LINES[_engine(profile)] if marker[1] in order)
    track = _Track(order)
    last_line: str | None = None
    last_at: float | None = None
    for line in lines:
        text, at, written = _engine_time(line, engine_utc_offset_seconds)
        if not text.strip():
            continue
        last_line, last_at = text, written if written is not None else line.received
        for pattern, phase, ends in markers:
            match = pattern.search(text)
            if match:
                reported = float(match.group(1)) if match.groups() and match.group(1) else None
                track.line(order.index(phase), ends, at, reported)
                break
    done = track.current >= len(order)
    current = None if done or track.current < 0 else order[track.current]
    return NodeStart(
        profile=profile,
        phases=phases,
        phase=current,
        since=track.since if current is not None else None,
        done=done,
        finished=tuple(track.finished),
        last_line=last_line,
        last_line_at=last_at,
    )


def _engine_time(line: LogLine, offset: float) -> tuple[str, float, float | None]:
    """The line without a `docker logs -t` prefix, its time (the engine's own where it has one), and when the
    container wrote it (from that prefix, else None)."""
    text = line.text.rstrip("\r\n")
    written_ns, rest = split_stamp(text)
    if written_ns is not None:
        written = seconds(written_ns)
        return rest, written, written
    sglang = _SGLANG_TIME.match(text)
    if sglang:
        return text, _utc(datetime.strptime(sglang[1], "%Y-%m-%d %H:%M:%S"), offset), None
    vllm = _VLLM_TIME.search(text)
    if vllm:
        # vLLM prints no year: the receive time's, or the year before when that would put the line in the future.
        year = datetime.fromtimestamp(line.received, UTC).year
        for candidate in (year, year - 1):
            try:
                at = _utc(datetime.strptime(f"{candidate}-{vllm[1]}", "%Y-%m-%d %H:%M:%S"), offset)
            except ValueError:  # 02-29 in a year without it
                continue
            if at <= line.received + 86400:
                return text, at, None
    return text, line.received, None


def _utc(naive: datetime, offset: float) -> float:
    return naive.replace(tzinfo=UTC).timestamp() - offset
