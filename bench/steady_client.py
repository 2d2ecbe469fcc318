"""A client that asks one model for a completion every 100 ms on a thread and keeps every answer: what "model B
keeps answering while model A rolls out" is counted with (tests/integration/test_models.py, bench/models_bench.py).

Also the sim's two-model stack: the sim's single-form config (sim/stack-defaults.yaml) turned into spark-llm:models
with the stand-in model across head and workers and a small second stand-in model on the head alone; and a third
small one beside it.
"""

from __future__ import annotations

import copy
import json
import statistics
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

INTERVAL_S = 0.1
SMALL = "spark-llm/standin-small"
THIRD = "spark-llm/standin-third"
# The stand-in model's memory budget beside SMALL: half of each node (placement needs one for an SGLang model).
BIG_FLAGS = ("--mem-fraction-static", "0.5")


@dataclass
class Answer:
    at: float
    """Seconds since the client started."""
    status: int | str
    """The HTTP status, or the error's name when none came (refused, reset, timed out)."""
    seconds: float


@dataclass
class SteadyClient:
    """`with SteadyClient(url, model, key) as client:` sends a one-token completion every `interval_s` (INTERVAL_S)
    until the block ends; `failures` are every answer but a 200."""

    url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 10
    interval_s: float = INTERVAL_S
    answers: list[Answer] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> SteadyClient:
        self._thread = threading.Thread(target=self._run, name=f"steady-{self.model}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s + 5)

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            sent = time.monotonic()
            status = self.ask()
            self.answers.append(Answer(round(sent - start, 3), status, time.monotonic() - sent))
            # The pace the issue asks for (a request every 100 ms, or `interval_s`): the wait is the interval itself.
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - sent)))

    def ask(self) -> int | str:
        body = json.dumps({"model": self.model, "prompt": "ping", "max_tokens": 1}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url + "/v1/completions", body, headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except OSError as error:
            return type(error).__name__

    @property
    def failures(self) -> list[Answer]:
        return [a for a in self.answers if a.status != 200]

    def summary(self) -> dict[str, Any]:
        """Requests, failures (each with its time and status) and the latency's p50/p99 in ms."""
        ms = sorted(a.seconds * 1000 for a in self.answers if a.status == 200)
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))] if ms else None
        return {
            "requests": len(self.answers),
            "failed": len(self.failures),
            "failures": [{"at_s": a.at, "status": a.status} for a in self.failures[:20]],
            "latency_ms": {
                "p50": round(statistics.median(ms), 2) if ms else None,
                "p99": round(p99, 2) if p99 else None,
            },
        }


def two_models(config: dict[str, Any], small_flags: tuple[str, ...] = ("--mem-fraction-static", "0.2")) -> None:
    """The sim's stack file's `config:` (single form) turned into two models: the stand-in model on every node at
    half of each node's memory, and SMALL on the head alone, on ports of its own."""
    model = config.pop("spark-llm:model")
    image = config.pop("spark-llm:image")
    engine = config.pop("spark-llm:engine")
    head = next(n["name"] for n in config["spark-llm:nodes"] if n["role"] == "head")
    big = {**model, "image": image, "engine": {**engine, "flags": list(BIG_FLAGS)}}
    small = {
        "name": SMALL,
        "path": "/srv/models/standin-small",
        "source": copy.deepcopy(model["source"]),
        "image": copy.deepcopy(image),
        "engine": {
            **engine,
            "port": engine["port"] + 1,
            "distPort": engine["distPort"] + 1,
            "flags": list(small_flags),
        },
        "nodes": [head],
    }
    config["spark-llm:models"] = [big, small]


def third_model(config: dict[str, Any]) -> None:
    """A third model added to `two_models`' stack: THIRD on the head beside SMALL, on the next ports, at a tenth of
    the head's memory."""
    small = next(m for m in config["spark-llm:models"] if m["name"] == SMALL)
    engine = {**small["engine"], "port": small["engine"]["port"] + 1, "distPort": small["engine"]["distPort"] + 1}
    engine["flags"] = ["--mem-fraction-static", "0.1"]
    config["spark-llm:models"].append({**small, "name": THIRD, "path": "/srv/models/standin-third", "engine": engine})
