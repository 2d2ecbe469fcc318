"""The launch sequence every real engine's stand-in entry point runs: parse, serve HTTP, rendezvous, watch."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from types import FrameType

from standin_engine.flags import LaunchConfig, engine_profile, parse_launch_config
from standin_engine.knobs import HANG_BEFORE_RENDEZVOUS, SLOW_START_SECONDS, FailureKnobs, KnobError
from standin_engine.logs import EngineLog
from standin_engine.model_runner import init_torch_distributed
from standin_engine.openai_api import EngineHTTPServer, EngineState

EXIT_FAILED = 1
EXIT_USAGE = 2


def run(engine: str, argv: Sequence[str]) -> int:
    """Run one node of the stand-in engine until its group breaks or a signal stops it; return the exit code."""
    config = parse_launch_config(engine, argv)
    log = EngineLog(config.tp_rank)
    log.server(
        f"spark-llm stand-in engine: a simulator of {engine_profile(engine).display_name}'s multi-node launch, "
        "no model, no GPU"
    )
    log.server(f"server_args={config!r}")
    try:
        knobs = FailureKnobs.from_environ(os.environ, config.nnodes)
    except KnobError as error:
        log.server(f"error: {error}")
        return EXIT_USAGE
    knob_settings = " ".join(
        f"{name}={value}" for name, value in sorted(os.environ.items()) if name.startswith("STANDIN_")
    )
    if knob_settings:
        log.server(f"Stand-in failure knobs: {knob_settings}")
    _exit_on_signals(log)

    state = EngineState(config)
    try:
        http_server = EngineHTTPServer(state, log)
    except OSError as error:
        log.server(
            f"ERROR:    [Errno {error.errno}] error while attempting to bind on address "
            f"({config.host!r}, {config.port}): {error.strerror or error}"
        )
        return EXIT_FAILED
    threading.Thread(target=http_server.serve_forever, name="http", daemon=True).start()
    served = "OpenAI API" if config.is_head else "/health and /health_generate only"
    log.server(f"Stand-in HTTP server on http://{config.host}:{config.port} ({served}; 503 until every rank joined)")

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
    log.scheduler("Init torch distributed begin.")
    try:
        group = init_torch_distributed(config, knobs, log)
    except Exception:
        log.scheduler(f"Scheduler hit an exception: {traceback.format_exc().rstrip()}")
        return EXIT_FAILED
    log.scheduler("Init torch distributed ends. mem usage=0.00 GB")
    log.scheduler(f"Load weight begin. avail mem=0.00 GB (stand-in: nothing is read from {config.model_path})")
    log.scheduler("Load weight end. type=StandIn, dtype=none, avail mem=0.00 GB, mem usage=0.00 GB.")
    state.mark_ready()
    if config.is_head:
        log.server("The server is fired up and ready to roll!")
    else:
        log.server(f"Dummy health check server serving on {config.host}:{config.port}")

    loss = group.wait_for_loss()
    log.scheduler(
        f"Scheduler hit an exception: RuntimeError: stand-in process group aborted, as a real NCCL group would: {loss}"
    )
    log.server("Exiting: the process group of this engine is broken.")
    return EXIT_FAILED


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
