"""Log lines shaped like SGLang's (`[2026-01-01 12:00:00 TP0] Init torch distributed begin.`), flushed at once."""

from __future__ import annotations

import sys
import threading
from datetime import datetime

_write_lock = threading.Lock()


class EngineLog:
    """Writes one node's log lines to stdout, each prefixed with the time and, for scheduler lines, the TP rank."""

    def __init__(self, tp_rank: int) -> None:
        self.tp_rank = tp_rank

    def server(self, message: str) -> None:
        """A line of the server process (no TP prefix), like SGLang's HTTP server and launcher."""
        self._write(f"[{_now()}] {message}")

    def scheduler(self, message: str) -> None:
        """A line of this node's scheduler (TP prefix), like SGLang's model runner."""
        self._write(f"[{_now()} TP{self.tp_rank}] {message}")

    @staticmethod
    def _write(line: str) -> None:
        with _write_lock:
            sys.stdout.write(line if line.endswith("\n") else line + "\n")
            sys.stdout.flush()


def _now() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S")
