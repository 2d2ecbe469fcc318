"""Log lines shaped like each real engine's, flushed at once: what an operator greps for in `docker logs`.

SGLang: `[2026-01-01 12:00:00 TP0] Init torch distributed begin.`
vLLM:   `(EngineCore_DP0 pid=7) INFO 01-01 12:00:00 [core.py:94] Initializing a V1 LLM engine (v0.16.0) ...`
"""

from __future__ import annotations

import os
import sys
import threading
import time
from datetime import datetime

from standin_engine.launch_config import LaunchConfig

_write_lock = threading.Lock()


def write_line(line: str) -> None:
    """One line to stdout, whole, even when several threads log at once."""
    with _write_lock:
        sys.stdout.write(line if line.endswith("\n") else line + "\n")
        sys.stdout.flush()


class EngineLog:
    """One node's log: the server process's lines and the scheduler's (the rank's), in the engine's shape."""

    display_name = "engine"

    def __init__(self, config: LaunchConfig) -> None:
        self.config = config
        self.tp_rank = config.tp_rank
        self.dist_init_began = time.monotonic()

    def dist_init_seconds(self) -> float:
        return time.monotonic() - self.dist_init_began

    def server(self, message: str, level: str = "INFO", source: str | None = None) -> None:
        """A line of the launcher / HTTP server process; `source` is vLLM's `[file.py:line]`."""
        raise NotImplementedError

    def scheduler(self, message: str, level: str = "INFO", source: str | None = None) -> None:
        """A line of this node's rank (model runner, scheduler, worker); `source` is vLLM's `[file.py:line]`."""
        raise NotImplementedError

    def raw(self, text: str) -> None:
        """A line as a progress bar (tqdm) writes it: no prefix, no time."""
        write_line(text)

    # The milestones of a launch, worded as the real engine words them.

    def distributed_init_begin(self) -> None:
        raise NotImplementedError

    def distributed_init_end(self) -> None:
        raise NotImplementedError

    def ready(self) -> None:
        raise NotImplementedError

    def init_failed(self, traceback_text: str) -> None:
        raise NotImplementedError

    def group_broken(self, loss: str) -> None:
        raise NotImplementedError


class SGLangLog(EngineLog):
    """`[time] message` for the server, `[time TPn] message` for the scheduler, as SGLang's logging does."""

    display_name = "SGLang"

    def server(self, message: str, level: str = "INFO", source: str | None = None) -> None:
        write_line(f"[{_now()}] {message}")

    def scheduler(self, message: str, level: str = "INFO", source: str | None = None) -> None:
        write_line(f"[{_now()} TP{self.tp_rank}] {message}")

    def distributed_init_begin(self) -> None:
        self.dist_init_began = time.monotonic()
        self.scheduler("Init torch distributed begin.")

    def distributed_init_end(self) -> None:
        # `elapsed=` since SGLang's 2026 releases (0.5.17 here); 0.5.5 logs the memory only.
        elapsed = f"elapsed={self.dist_init_seconds():.2f} s, " if self.config.version >= (0, 5, 17) else ""
        self.scheduler(f"Init torch distributed ends. {elapsed}mem usage=0.00 GB")

    def ready(self) -> None:
        config = self.config
        if config.is_head:
            # uvicorn's lines (SGLang's HTTP server), then the warm-up request's success line (http_server.py).
            self.server(f"INFO:     Started server process [{os.getpid()}]")
            self.server("INFO:     Waiting for application startup.")
            self.server("INFO:     Application startup complete.")
            self.server(f"INFO:     Uvicorn running on http://{config.host}:{config.port} (Press CTRL+C to quit)")
            self.server("The server is fired up and ready to roll!")
        else:
            # A node rank > 0 runs no tokenizer nor API, only a health server (srt/utils/common.py).
            self.server(f"Starting dummy health check server at {config.host}:{config.port}")
            self.server(f"Dummy health check server serving on {config.host}:{config.port}")

    def init_failed(self, traceback_text: str) -> None:
        self.scheduler(f"Scheduler hit an exception: {traceback_text}")

    def group_broken(self, loss: str) -> None:
        self.scheduler(
            "Scheduler hit an exception: RuntimeError: stand-in process group aborted, as a real NCCL group "
            f"would: {loss}"
        )
        self.server("Exiting: the process group of this engine is broken.")


class VLLMLog(EngineLog):
    """`(Process pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message`, vLLM's logging format and process prefixes."""

    display_name = "vLLM"

    def __init__(self, config: LaunchConfig) -> None:
        super().__init__(config)
        self.pid = os.getpid()
        # The head's API server process, the engine core on rank 0, a worker process on the headless ranks.
        self.server_prefix = f"(APIServer pid={self.pid}) " if config.serves_api else ""
        self.rank_prefix = (
            f"(EngineCore_DP0 pid={self.pid}) " if config.is_head else f"(Worker_TP{self.tp_rank} pid={self.pid}) "
        )

    def server(self, message: str, level: str = "INFO", source: str | None = None) -> None:
        if source is None:
            source = "api_server.py:1885" if self.config.serves_api else "serve.py:243"
        write_line(f"{self.server_prefix}{level} {_vllm_now()} [{source}] {message}")

    def scheduler(self, message: str, level: str = "INFO", source: str | None = None) -> None:
        if source is None:
            source = "core.py:94" if self.config.is_head else "multiproc_executor.py:541"
        write_line(f"{self.rank_prefix}{level} {_vllm_now()} [{source}] {message}")

    def distributed_init_begin(self) -> None:
        self.dist_init_began = time.monotonic()
        config = self.config
        if config.serves_api:
            self.scheduler(
                f"Initializing a V1 LLM engine (v{config.engine_version}) with config: model={config.model_path!r}, "
                f"served_model_name={config.served_model_name}, tensor_parallel_size={config.tp_size}, "
                f"pipeline_parallel_size={config.pp_size}, distributed_executor_backend="
                f"{config.executor_backend or ('mp' if config.world_size > 1 else 'uni')} (spark-llm stand-in)"
            )
        elif not config.is_head or config.headless:
            self.server(
                f"Launching vLLM (v{config.engine_version}) headless multiproc executor, with head node address "
                f"{config.dist_init_addr} for torch.distributed process group."
            )
        method = f"tcp://{config.dist_init_addr}" if config.dist_init_addr else "env://"
        self.scheduler(
            f"world_size={config.world_size} rank={config.tp_rank} local_rank=0 "
            f"distributed_init_method={method} backend=nccl",
            source="parallel_state.py:1208",
        )

    def distributed_init_end(self) -> None:
        self.scheduler(
            f"rank {self.config.tp_rank} in world size {self.config.world_size} is assigned as DP rank 0, "
            f"PP rank 0, TP rank {self.config.tp_rank}, EP rank N/A",
            source="parallel_state.py:1494",
        )

    def ready(self) -> None:
        config = self.config
        if config.serves_api:
            url = f"http://{config.host}:{config.port}"
            if config.version >= (0, 20):  # the wording of the 2026 releases (seen in 0.20's logs)
                self.server(f"Starting vLLM server on {url}", source="api_server.py:602")
            else:
                self.server(f"Starting vLLM API server 0 on {url}", source="api_server.py:1971")
            for uvicorn in (
                "Started server process [{pid}]",
                "Waiting for application startup.",
                "Application startup complete.",
            ):
                write_line(f"{self.server_prefix}INFO:     {uvicorn.format(pid=self.pid)}")
        else:
            self.scheduler("Headless worker is part of the group; it runs no API server.")

    def init_failed(self, traceback_text: str) -> None:
        what = "EngineCore failed to start." if self.config.is_head else "WorkerProc failed to start."
        self.scheduler(f"{what}\n{traceback_text}", level="ERROR", source="core.py:708")

    def group_broken(self, loss: str) -> None:
        self.scheduler(
            f"Worker proc died unexpectedly, shutting down executor: {loss}",
            level="ERROR",
            source="multiproc_executor.py:154",
        )
        if self.config.serves_api:
            self.server(
                "AsyncLLM output_handler failed. vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered "
                "an issue. See stack trace (above) for the root cause.",
                level="ERROR",
                source="async_llm.py:480",
            )


def engine_log(config: LaunchConfig) -> EngineLog:
    """The log of this node in its engine's shape."""
    return SGLangLog(config) if config.engine == "sglang" else VLLMLog(config)


def _now() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")


def _vllm_now() -> str:
    return datetime.now().strftime("%m-%d %H:%M:%S")
