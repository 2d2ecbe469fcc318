"""The launch sequence every real engine's stand-in entry point runs: parse, serve HTTP, form the group, watch it."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from types import FrameType

from standin_engine.command_line import ParsedLaunch, parse_launch
from standin_engine.engine_state import EngineState
from standin_engine.knobs import HANG_BEFORE_RENDEZVOUS, SLOW_START_SECONDS, FailureKnobs, KnobError
from standin_engine.launch_config import LaunchConfig
from standin_engine.logs import EngineLog, engine_log
from standin_engine.model_runner import init_torch_distributed
from standin_engine.openai_api import EngineHTTPServer
from standin_engine.rendezvous import ProcessGroup
from standin_engine.start_phases import PHASES, OutOfMemoryError, hang_forever, run_phases_after_init

EXIT_FAILED = 1
EXIT_USAGE = 2


def run(entry_name: str, argv: Sequence[str]) -> int:
    """Run one node of the stand-in engine until its group breaks or a signal stops it; return the exit code.

    `entry_name` names the real command the argv came with (command_line.ENTRY_POINTS): `sglang.launch_server`,
    `sglang` (`sglang serve`), `vllm` (`vllm serve`), `vllm.entrypoints.openai.api_server`.
    """
    parsed = parse_launch(entry_name, argv)
    config = parsed.config
    log = engine_log(config)
    _log_start(parsed, log)
    try:
        knobs = FailureKnobs.from_environ(
            os.environ, config.world_size if config.uses_ray else config.nnodes, config.engine
        )
    except KnobError as error:
        log.server(f"error: {error}", level="ERROR")
        return EXIT_USAGE
    knob_settings = " ".join(
        f"{name}={value}" for name, value in sorted(os.environ.items()) if name.startswith("STANDIN_")
    )
    if knob_settings:
        log.server(f"Stand-in failure knobs: {knob_settings}")
    _exit_on_signals(log)

    state = EngineState(config)
    if config.engine == "sglang" or config.serves_api:
        # SGLang's workers serve /health too; vLLM's headless ranks run no HTTP server at all.
        try:
            http_server = EngineHTTPServer(state, log)
        except OSError as error:
            log.server(
                f"ERROR:    [Errno {error.errno}] error while attempting to bind on address "
                f"({config.host!r}, {config.port}): {error.strerror or error}",
                level="ERROR",
            )
            return EXIT_FAILED
        threading.Thread(target=http_server.serve_forever, name="http", daemon=True).start()
        served = "OpenAI API" if config.serves_api else "/health and /health_generate only"
        log.server(
            f"Stand-in HTTP server on http://{config.host}:{config.port} ({served}; 503 until every rank joined)"
        )

    if config.uses_ray:
        group = _form_ray_group(config, state, log)
    else:
        group = _form_native_group(config, knobs, state, log)
    if group is None:
        return EXIT_FAILED
    log.distributed_init_end()
    if config.uses_ray:
        _note_ray_hangs(config, knobs, log)
    try:
        run_phases_after_init(config, knobs, log, state)
    except OutOfMemoryError:
        log.init_failed(traceback.format_exc().rstrip())
        return EXIT_FAILED
    state.mark_ready()
    log.ready()

    loss = group.wait_for_loss()
    log.group_broken(loss)
    return EXIT_FAILED


def _log_start(parsed: ParsedLaunch, log: EngineLog) -> None:
    config = parsed.config
    warning = parsed.entry.deprecation(parsed.catalog)
    if warning:
        log.server(warning, level="WARNING")
    log.server(
        f"spark-llm stand-in engine: a simulator of {log.display_name} {config.engine_version}'s multi-node launch "
        f"({parsed.entry.command}; flags checked against the {parsed.catalog.release_tag} catalog), no model, no GPU"
    )
    log.server(f"server_args={config!r}")
    if config.engine == "vllm" and config.skipped_phases:
        # --enforce-eager, in vLLM's words (vllm/config/vllm.py, as 0.20 logs it): no compile, no graph capture.
        log.server(
            "Enforce eager set, disabling torch.compile and CUDAGraphs. This is equivalent to setting "
            "-cc.mode=none -cc.cudagraph_mode=none",
            level="WARNING",
            source="vllm.py:896",
        )
    for flag in config.deprecated_flags:
        log.server(
            f"The command line argument '{flag}' is deprecated and will be removed in future versions.",
            level="WARNING",
        )


def _form_native_group(
    config: LaunchConfig, knobs: FailureKnobs, state: EngineState, log: EngineLog
) -> ProcessGroup | None:
    """The TCP rendezvous of SGLang's ranks and of vLLM's mp ranks; None when this rank failed (logged)."""
    if knobs.slow_start_seconds:
        state.phase = f"slow start ({SLOW_START_SECONDS}={knobs.slow_start_seconds:g})"
        log.scheduler(f"Stand-in: {SLOW_START_SECONDS} delays this rank's start by {knobs.slow_start_seconds:g} s")
        time.sleep(knobs.slow_start_seconds)
    if knobs.hangs_before_rendezvous(config.node_rank):
        state.phase = f"held before the rendezvous by {HANG_BEFORE_RENDEZVOUS}"
        log.scheduler(
            f"Stand-in: {HANG_BEFORE_RENDEZVOUS} holds node rank {config.node_rank} before the "
            "rendezvous; it will never arrive"
        )
        threading.Event().wait()

    state.phase = _waiting_phase(config)
    log.distributed_init_begin()
    if knobs.hangs_in("dist_init", config.node_rank):
        hang_forever()  # after the begin line, before the rendezvous: a rank stuck in NCCL's init
    time.sleep(knobs.seconds_in("dist_init"))
    try:
        if config.engine == "vllm" and not config.is_head and not config.headless:
            # A vLLM follower started without --headless builds a whole engine core and dies at its first RPC.
            raise AssertionError(
                "collective_rpc should not be called on follower node "
                f"(node rank {config.node_rank} was started without --headless)"
            )
        return init_torch_distributed(config, knobs, log)
    except Exception:
        log.init_failed(traceback.format_exc().rstrip())
        return None


def _form_ray_group(config: LaunchConfig, state: EngineState, log: EngineLog) -> ProcessGroup | None:
    """vLLM's Ray executor: the group is the Ray cluster (ray_executor.py); None when it failed (logged)."""
    from standin_engine.ray_executor import RayExecutorGroup

    state.phase = f"waiting for {config.world_size} GPU nodes in the Ray cluster"
    log.distributed_init_begin()
    group = RayExecutorGroup(config, log)
    try:
        group.form_group()
    except Exception:
        log.init_failed(traceback.format_exc().rstrip())
        return None
    return group


def _note_ray_hangs(config: LaunchConfig, knobs: FailureKnobs, log: EngineLog) -> None:
    """With Ray only the driver (rank 0) goes through the phases after dist_init: say so for other ranks' hangs."""
    for phase, rank in sorted(knobs.hang_in_phase):
        if rank != 0 and phase != PHASES["vllm"][0]:
            log.server(
                f"Stand-in: STANDIN_HANG_IN_PHASE={phase}@{rank} has no effect with Ray: after dist_init only rank "
                "0 (the driver) goes through the start phases",
                level="WARNING",
            )


def _waiting_phase(config: LaunchConfig) -> str:
    if config.nnodes == 1:
        return "initialising"
    if config.is_head:
        return f"waiting for {config.nnodes - 1} more node ranks at {config.dist_init_addr}"
    return f"joining rank 0 at {config.dist_init_addr}"


def _exit_on_signals(log: EngineLog) -> None:
    """SIGTERM and SIGINT end the engine at once, with a log line; PID 1 in a container needs the handler."""

    def handle(signum: int, _frame: FrameType | None) -> None:
        log.server(f"Received {signal.Signals(signum).name}; the stand-in engine exits.")
        sys.stdout.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
