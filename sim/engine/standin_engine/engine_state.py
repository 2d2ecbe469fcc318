"""EngineState: what rank 0's HTTP handlers (openai_api) read: the launch, whether every rank joined the group, the
answers the wedge knob still allows, and the engine's metrics (metrics.EngineMetrics, where it serves them)."""

from __future__ import annotations

import os
import threading
import time

from standin_engine.knobs import wedge_after_answers
from standin_engine.launch_config import LaunchConfig
from standin_engine.metrics import EngineMetrics, own_labels


class EngineState:
    """What the handlers read: the launch and whether every rank has joined the group."""

    def __init__(self, config: LaunchConfig) -> None:
        self.config = config
        self.created = int(time.time())
        self.phase = "starting"
        self._ready = threading.Event()
        self._answers = 0
        self._answers_lock = threading.Lock()
        self.wedge_after = wedge_after_answers(os.environ)
        """knobs.wedge_after_answers: the generations this engine answers before it wedges (None: no such knob)."""
        self.slots = threading.Semaphore(config.max_running) if config.max_running else None
        """The batch's free places (LaunchConfig.max_running): a request beyond them waits for one."""
        self.metrics = (
            EngineMetrics(
                config.engine,
                config.engine_version,
                own_labels(config.engine, config.served_model_name),
                config.context_length,
            )
            if config.serves_api and config.metrics
            else None
        )

    def take_answer(self) -> bool:
        """Whether a generation may be answered now: counts it, and False once the engine has wedged for good."""
        with self._answers_lock:
            if self.wedge_after is not None and self._answers >= self.wedge_after:
                return False
            self._answers += 1
            return True

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def mark_ready(self) -> None:
        self.phase = "ready"
        self._ready.set()
