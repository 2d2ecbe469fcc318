"""The phases of a real engine's start, logged in the real engines' words, with knobs for their length and a hang.

An operator (and `spark_llm/plan/start/phases.py`) follows a start by these lines; the stand-in prints each phase's
lines in the real order, spends STANDIN_PHASE_SECONDS in it (a few hundredths of a second by default) and stops for
good in a phase named by STANDIN_HANG_IN_PHASE, as a rank stuck in NCCL or in CUDA-graph capture does: the phase's
first line is there, its last never comes, the process stays alive and prints nothing more.

Where each line comes from (the `fetch` snapshots were over the size limit, so the shapes were read through the
search index: the engines' source files and logs that people published from real runs, cited per line below). The
version boundaries (which release changed a wording) are inferred from dated logs, not read from tagged sources:
SGLang's `elapsed=` and per-capture-set graph lines from 0.5.17 (seen in 2026 logs; a public note dates the graph
rename after v0.5.10), vLLM's `GiB memory and` from 0.12 and `Starting vLLM server on` from 0.20 (seen in 0.20's log).

SGLang (`python/sglang/srt/model_executor/model_runner.py` unless noted; `[time TPn]` scheduler lines):
  dist_init  `Init torch distributed begin.` .. `Init torch distributed ends. elapsed=13.00 s, mem usage=3.81 GB`
             (before 2026: `Init torch distributed ends. mem usage=3.81 GB`)
  weights    `Load weight begin. avail mem=283.50 GB` .. `Load weight end. elapsed=228.09 s, type=GlmMoeDsaForCausalLM,
             dtype=torch.bfloat16, avail mem=194.04 GB, mem usage=89.58 GB.` (before 2026 without `elapsed=`)
  kv_cache   `KV Cache is allocated. dtype: torch.bfloat16, #tokens: 104273, K size: 5.57 GB, V size: 5.57 GB` ..
             `Memory pool end. avail mem=2.43 GB` (mem_cache / model_runner memory pool)
  graph      0.5.5: `Capture cuda graph begin. This can take up to several minutes. avail mem=1.80 GB` ..
             `Capture cuda graph end. Time elapsed: 18.28 s. mem usage=0.11 GB. avail mem=1.70 GB.`;
             after v0.5.10 (so 0.5.17, 0.5.23): `Capture target decode CUDA graph begin. backend=full,
             num_tokens_per_req=1, bs=[1, 2, 4, 8], avail mem=12.41 GB` .. `Capture target decode CUDA graph end.
             elapsed=18.62 s, mem usage=0.43 GB, avail mem=11.98 GB.`
  server     `max_total_num_tokens=..., chunked_prefill_size=..., ...` (managers/scheduler.py), uvicorn's
             `INFO:     Application startup complete.`, then `The server is fired up and ready to roll!`
             (entrypoints/http_server.py); a node rank > 0 `Starting dummy health check server at HOST:PORT`
             (srt/utils/common.py)
vLLM (`(EngineCore_DP0 pid=N) INFO MM-DD HH:MM:SS [file.py:line] ...`; `(Worker_TPn pid=N)` on headless ranks):
  dist_init  `world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://... backend=nccl` ..
             `rank 0 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank N/A`
             (vllm/distributed/parallel_state.py)
  weights    `Starting to load model M...` (vllm/v1/worker/gpu_model_runner.py) .. `Loading weights took 18.35
             seconds` (vllm/model_executor/model_loader/default_loader.py) .. `Model loading took 17.62 GiB memory and
             20.695716 seconds` (gpu_model_runner.py; 0.11: `... 4.2117 GiB and 5.31 seconds`)
  compile    `Using cache directory: .../torch_compile_cache/<hash>/rank_0_0/backbone for vLLM's torch.compile`,
             `Dynamo bytecode transform time: 5.73 s`, `Compiling a graph for compile range (1, 2048) takes 15.02 s`
             (0.11: `... for dynamic shape takes ...`) (vllm/compilation/backends.py) .. `torch.compile takes 20.75 s
             in total` (vllm/compilation/monitor.py)
  kv_cache   `Available KV cache memory: 6.67 GiB` (vllm/v1/worker/gpu_worker.py) .. on the engine core
             `GPU KV cache size: 53,312 tokens`, `Maximum concurrency for 32,768 tokens per request: 5.15x`
             (vllm/v1/core/kv_cache_utils.py)
  graph      tqdm `Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): ...` .. `Graph capturing finished in 8
             secs, took 0.31 GiB` (gpu_model_runner.py), `init engine (profile, create kv cache, warmup model) took
             57.05 seconds` (vllm/v1/engine/core.py)
  server     `Starting vLLM API server 0 on http://0.0.0.0:8000` (0.11, 0.16; 0.33: `Starting vLLM server on ...`)
             (vllm/entrypoints/openai/api_server.py), then uvicorn's `INFO:     Application startup complete.`
  Ray        the placement group wait `Waiting for creating a placement group of specs for 10 seconds. specs=[...]`
             (vllm/v1/executor/ray_utils.py) belongs to dist_init.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from standin_engine.launch_config import MAX_MEMORY_FRACTION

if TYPE_CHECKING:  # knobs imports PHASES from here
    from standin_engine.engine_state import EngineState
    from standin_engine.knobs import FailureKnobs
    from standin_engine.launch_config import LaunchConfig
    from standin_engine.logs import EngineLog

# The phases in start order; the names are the knobs' and the program's parser's (spark_llm/plan/start/phases.py).
PHASES: dict[str, tuple[str, ...]] = {
    "sglang": ("dist_init", "weights", "kv_cache", "graph", "server"),
    "vllm": ("dist_init", "weights", "compile", "kv_cache", "graph", "server"),
}
# Short: every phase of a default start together takes about a tenth of a second, so tests don't slow down.
DEFAULT_PHASE_SECONDS = 0.02

KV_TOKENS = 8192
CUDA_GRAPH_BATCH_SIZES = "[1, 2, 4, 8]"


class OutOfMemoryError(RuntimeError):
    """torch's `torch.OutOfMemoryError`, by its name in a traceback (the real engines' log shows it so)."""


OutOfMemoryError.__module__ = "torch"


def out_of_memory(fraction: float) -> OutOfMemoryError:
    """What a rank logs when the KV cache does not fit: PyTorch's own words (torch 2.5 on, c10/cuda allocator)."""
    total = 119.70
    taken = round(total * fraction, 2)
    return OutOfMemoryError(
        f"CUDA out of memory. Tried to allocate {taken - total * MAX_MEMORY_FRACTION + 2.0:.2f} GiB. GPU 0 has a "
        f"total capacity of {total:.2f} GiB of which {total - taken:.2f} GiB is free. Including non-PyTorch memory, "
        f"this process has {taken:.2f} GiB memory in use. Of the allocated memory {taken - 1.5:.2f} GiB is "
        "allocated by PyTorch, and 1.21 GiB is reserved by PyTorch but unallocated. If reserved but unallocated "
        "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def hang_forever() -> None:
    """Stop for good, silently, as a rank stuck in a collective: the process lives, nothing more is printed."""
    threading.Event().wait()


def run_phases_after_init(config: LaunchConfig, knobs: FailureKnobs, log: EngineLog, state: EngineState) -> None:
    """Print every phase after dist_init in order, spending its seconds in each; stop for good where a knob says;
    raise OutOfMemoryError at the KV cache when the memory fraction is above MAX_MEMORY_FRACTION.

    The server phase has no end line here: the caller marks the node ready and logs its ready lines.
    """
    lines = phase_lines(config, log)
    for phase in PHASES[_engine(config)][1:]:
        if phase in config.skipped_phases:
            continue
        state.phase = f"start phase {phase}"
        started = time.monotonic()
        lines.begin(phase)
        fraction = config.memory_fraction
        if phase == "kv_cache" and fraction is not None and fraction > MAX_MEMORY_FRACTION:
            # A fraction the engine took at parse time, fatal at load: the caller logs it as the engine does.
            raise out_of_memory(fraction)
        if knobs.hangs_in(phase, config.node_rank):
            hang_forever()
        time.sleep(knobs.seconds_in(phase))
        if phase != "server":
            lines.end(phase, time.monotonic() - started)


def _engine(config: LaunchConfig) -> str:
    return "vllm" if config.engine == "vllm" else "sglang"


class PhaseLines:
    """The begin and end lines of each phase after dist_init (dist_init's are EngineLog's own)."""

    def __init__(self, config: LaunchConfig, log: EngineLog) -> None:
        self.config = config
        self.log = log

    def begin(self, phase: str) -> None:
        getattr(self, f"begin_{phase}", lambda: None)()

    def end(self, phase: str, seconds: float) -> None:
        getattr(self, f"end_{phase}")(seconds)


class SGLangPhaseLines(PhaseLines):
    @property
    def since_2026(self) -> bool:
        """0.5.17 and later: `elapsed=` in the end lines and the per-capture-set graph lines."""
        return self.config.version >= (0, 5, 17)

    def begin_weights(self) -> None:
        self.log.scheduler("Load weight begin. avail mem=0.00 GB")

    def end_weights(self, seconds: float) -> None:
        elapsed = f"elapsed={seconds:.2f} s, " if self.since_2026 else ""
        self.log.scheduler(
            f"Load weight end. {elapsed}type=StandInForCausalLM, dtype=torch.bfloat16, avail mem=0.00 GB, "
            "mem usage=0.00 GB."
        )

    def begin_kv_cache(self) -> None:
        dtype = "dtype: torch.bfloat16, " if self.since_2026 else ""
        self.log.scheduler(f"KV Cache is allocated. {dtype}#tokens: {KV_TOKENS}, K size: 0.00 GB, V size: 0.00 GB")

    def end_kv_cache(self, seconds: float) -> None:
        self.log.scheduler("Memory pool end. avail mem=0.00 GB")

    def begin_graph(self) -> None:
        if self.since_2026:
            self.log.scheduler(
                "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
                f"bs={CUDA_GRAPH_BATCH_SIZES}, avail mem=0.00 GB"
            )
        else:
            self.log.scheduler("Capture cuda graph begin. This can take up to several minutes. avail mem=0.00 GB")

    def end_graph(self, seconds: float) -> None:
        if self.since_2026:
            self.log.scheduler(
                f"Capture target decode CUDA graph end. elapsed={seconds:.2f} s, mem usage=0.00 GB, avail mem=0.00 GB."
            )
        else:
            self.log.scheduler(
                f"Capture cuda graph end. Time elapsed: {seconds:.2f} s. mem usage=0.00 GB. avail mem=0.00 GB."
            )

    def begin_server(self) -> None:
        config = self.config
        self.log.scheduler(
            f"max_total_num_tokens={KV_TOKENS}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests=4096, context_len={config.context_length}, available_gpu_mem=0.00 GB"
        )


class VLLMPhaseLines(PhaseLines):
    def begin_weights(self) -> None:
        self.log.scheduler(f"Starting to load model {self.config.model_path}...", source="gpu_model_runner.py:2602")

    def end_weights(self, seconds: float) -> None:
        self.log.scheduler(f"Loading weights took {seconds:.2f} seconds", source="default_loader.py:384")
        memory = "GiB and" if self.config.version < (0, 12) else "GiB memory and"
        self.log.scheduler(
            f"Model loading took 0.0000 {memory} {seconds:.6f} seconds", source="gpu_model_runner.py:2634"
        )

    def begin_compile(self) -> None:
        rank = self.config.tp_rank
        self.log.scheduler(
            f"Using cache directory: /root/.cache/vllm/torch_compile_cache/5tand1n000/rank_{rank}_0/backbone for "
            "vLLM's torch.compile",
            source="backends.py:643",
        )

    def end_compile(self, seconds: float) -> None:
        self.log.scheduler(f"Dynamo bytecode transform time: {seconds / 2:.2f} s", source="backends.py:703")
        shape = "dynamic shape" if self.config.version < (0, 12) else f"compile range (1, {KV_TOKENS})"
        self.log.scheduler(f"Compiling a graph for {shape} takes {seconds / 2:.2f} s", source="backends.py:278")
        self.log.scheduler(f"torch.compile takes {seconds:.2f} s in total", source="monitor.py:34")

    def end_kv_cache(self, seconds: float) -> None:
        self.log.scheduler("Available KV cache memory: 0.00 GiB", source="gpu_worker.py:298")
        if self.config.is_head:  # the engine core sizes the cache for the whole group
            self.log.scheduler(f"GPU KV cache size: {KV_TOKENS:,} tokens", source="kv_cache_utils.py:1087")
            self.log.scheduler(
                f"Maximum concurrency for {self.config.context_length:,} tokens per request: "
                f"{KV_TOKENS / self.config.context_length:.2f}x",
                source="kv_cache_utils.py:1091",
            )

    def begin_graph(self) -> None:
        if self.config.is_head:  # tqdm's bar, drawn by the first rank only
            self.log.raw(
                "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|          | 0/4 [00:00<?, ?it/s]"
            )

    def end_graph(self, seconds: float) -> None:
        self.log.scheduler(
            f"Graph capturing finished in {seconds:.0f} secs, took 0.00 GiB", source="gpu_model_runner.py:3480"
        )
        if self.config.is_head:
            self.log.scheduler(
                f"init engine (profile, create kv cache, warmup model) took {seconds:.2f} seconds",
                source="core.py:210",
            )


def phase_lines(config: LaunchConfig, log: EngineLog) -> PhaseLines:
    return VLLMPhaseLines(config, log) if config.engine == "vllm" else SGLangPhaseLines(config, log)
