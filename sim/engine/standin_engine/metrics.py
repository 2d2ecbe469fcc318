"""GET /metrics on rank 0: the metrics the real engine's release serves, by its own names, types and labels (its
metric catalog, catalogs/<engine>-<version>.metrics.json: spark_llm/config/metric_catalog.py reads the same file),
in Prometheus's text format, as prometheus_client writes it.

Every metric a plain serving engine has is there from the start (a series at 0 where its labels are the engine's
own); the ones below move as the stand-in serves: running and waiting requests (a request held by the wedge
knob keeps running, and no token comes: the wedge signal; beyond the batch limit, --max-num-seqs or
--max-running-requests, requests wait), tokens, time to first token, inter-token and request latency,
finished requests, KV-cache use. vLLM serves /metrics always; SGLang only with --enable-metrics.
Python's standard library only.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from standin_engine.catalog import CATALOG_DIR

SERVING_COLLECTORS = ("SchedulerMetricsCollector", "TokenizerMetricsCollector")  # as metric_catalog's

# What moves, by role, each engine's names newest first (spark_llm.config.metric_catalog.ROLE_NAMES: a unit test
# holds the two equal).
ROLE_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "running": {"vllm": ("vllm:num_requests_running",), "sglang": ("sglang:num_running_reqs",)},
    "waiting": {"vllm": ("vllm:num_requests_waiting",), "sglang": ("sglang:num_queue_reqs",)},
    "prompt_tokens": {"vllm": ("vllm:prompt_tokens",), "sglang": ("sglang:prompt_tokens_total",)},
    "generation_tokens": {"vllm": ("vllm:generation_tokens",), "sglang": ("sglang:generation_tokens_total",)},
    "ttft": {"vllm": ("vllm:time_to_first_token_seconds",), "sglang": ("sglang:time_to_first_token_seconds",)},
    "inter_token": {
        "vllm": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "sglang": ("sglang:inter_token_latency_seconds",),
    },
    "e2e": {"vllm": ("vllm:e2e_request_latency_seconds",), "sglang": ("sglang:e2e_request_latency_seconds",)},
    "kv_cache": {"vllm": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "sglang": ("sglang:token_usage",)},
    "requests": {"vllm": ("vllm:request_success",), "sglang": ("sglang:num_requests_total",)},
}
# prometheus_client's default latency buckets, extended for long generations.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0, math.inf)


def metrics_path(engine: str, version: str) -> Path:
    return CATALOG_DIR / f"{engine}-{version}.metrics.json"


@dataclass
class _Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.buckets[i] += 1
        self.total += value
        self.count += 1


def _number(value: float) -> str:
    return "+Inf" if value == math.inf else repr(float(value))


def _labels(pairs: list[tuple[str, str]]) -> str:
    if not pairs:
        return ""
    escaped = (v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for _, v in pairs)
    return "{" + ",".join(f'{k}="{v}"' for (k, _), v in zip(pairs, escaped, strict=True)) + "}"


class EngineMetrics:
    """The served metrics and their values; thread-safe (the HTTP server answers on many threads)."""

    def __init__(self, engine: str, version: str, own_labels: dict[str, str], context_length: int) -> None:
        data = json.loads(metrics_path(engine, version).read_text())
        self.engine = engine
        self.metrics = {
            m["name"]: m
            for m in data["metrics"]
            if not m["conditional"]
            and m["labels"] is not None
            and (engine != "sglang" or m.get("collector") in SERVING_COLLECTORS)
        }
        self.own = own_labels
        self.context_length = max(1, context_length)
        self.lock = threading.Lock()
        self.values: dict[tuple[str, tuple[tuple[str, str], ...]], float | _Histogram] = {}
        self.running_tokens = 0
        for name, metric in self.metrics.items():
            if set(metric["labels"]) <= set(own_labels):  # the engine's own labels only: a series from the start
                self._series(name)

    def name(self, role: str) -> str | None:
        return next((n for n in ROLE_NAMES[role][self.engine] if n in self.metrics), None)

    def _key(self, name: str, extra: dict[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
        """One series: the metric and its label values (the engine's own, then the request's; "" when neither)."""
        values = {**self.own, **extra}
        return name, tuple((label, values.get(label, "")) for label in self.metrics[name]["labels"])

    def _series(self, name: str, **extra: str) -> float | _Histogram:
        key = self._key(name, extra)
        if key not in self.values:
            self.values[key] = _Histogram() if self.metrics[name]["type"] in ("histogram", "summary") else 0.0
        return self.values[key]

    def _add(self, role: str, amount: float, **extra: str) -> None:
        if (name := self.name(role)) is not None:
            current = self._series(name, **extra)
            assert not isinstance(current, _Histogram)
            self.values[self._key(name, extra)] = current + amount

    def _set(self, name: str, value: float) -> None:
        self.values[self._key(name, {})] = value

    def _observe(self, role: str, value: float, **extra: str) -> None:
        if (name := self.name(role)) is not None:
            series = self._series(name, **extra)
            assert isinstance(series, _Histogram)
            series.observe(value)

    def _kv(self) -> None:
        if (name := self.name("kv_cache")) is not None:
            self._set(name, min(1.0, self.running_tokens / self.context_length))

    def _end(self, request: RunningRequest) -> None:
        with self.lock:
            if request.scheduled:
                self._add("running", -1)
                self.running_tokens -= request.tokens
                self._kv()
            else:
                self._add("waiting", -1)

    def _schedule(self, request: RunningRequest) -> None:
        with self.lock:
            self._add("waiting", -1)
            self._add("running", 1)
            self.running_tokens += request.tokens
            self._kv()

    def finished(
        self, request: RunningRequest, prompt_tokens: int, tokens: list[int], reasons: list[str], stream: bool
    ) -> None:
        """A request answered: its tokens and latencies (`tokens`: each choice's generated tokens); it runs no more
        (before its answer is sent, as an engine's request leaves the batch before its last bytes reach the client)."""
        request.end()
        started = request.started
        elapsed = time.monotonic() - started
        generated = sum(tokens)
        streaming = {"is_streaming": str(stream).lower()}
        with self.lock:
            self._add("prompt_tokens", prompt_tokens, **streaming)
            self._add("generation_tokens", generated, **streaming)
            self._observe("ttft", elapsed, **streaming)
            if generated > 1:
                self._observe("inter_token", elapsed / generated)
            self._observe("e2e", elapsed, **streaming)
            for reason in reasons:
                self._add("requests", 1, finished_reason=reason)

    def render(self) -> str:
        out: list[str] = []
        with self.lock:
            for name, metric in sorted(self.metrics.items()):
                series = [(key, value) for key, value in self.values.items() if key[0] == name]
                # Text format 0.0.4, as prometheus_client writes it: a counter's HELP and TYPE name end in _total.
                family = f"{name.removesuffix('_total')}_total" if metric["type"] == "counter" else name
                out.append(f"# HELP {family} {metric['type']} of {self.engine}, served by the spark-llm stand-in")
                out.append(f"# TYPE {family} {metric['type']}")
                for (_, labels), value in series:
                    pairs = list(labels)
                    if isinstance(value, _Histogram):
                        if metric["type"] == "histogram":
                            for bound, count in zip(BUCKETS, value.buckets, strict=True):
                                le = _labels([*pairs, ("le", _number(bound))])
                                out.append(f"{name}_bucket{le} {_number(count)}")
                        out.append(f"{name}_count{_labels(pairs)} {_number(value.count)}")
                        out.append(f"{name}_sum{_labels(pairs)} {_number(value.total)}")
                    elif metric["type"] == "counter":
                        out.append(f"{family}{_labels(pairs)} {_number(value)}")
                    else:
                        out.append(f"{name}{_labels(pairs)} {_number(value)}")
        return "\n".join(out) + "\n"


class RunningRequest:
    """One API request, from its arrival (`arrived`) to its answer: waiting until the engine takes it into its batch
    (`schedule`), then running with its tokens of KV cache; counted where the engine serves metrics."""

    def __init__(self, metrics: EngineMetrics | None) -> None:
        self.metrics = metrics
        self.tokens = 0
        self.started = time.monotonic()
        self.scheduled = False
        self.ended = False
        self.slot: threading.Semaphore | None = None

    def schedule(self, tokens: int, slots: threading.Semaphore | None) -> None:
        """Into the batch once a place is free (`slots`: the batch limit; None: no limit)."""
        if slots is not None:
            slots.acquire()
            self.slot = slots
        self.scheduled, self.tokens = True, tokens
        if self.metrics is not None:
            self.metrics._schedule(self)

    def end(self) -> None:
        """It runs no more (once: the answer ends it, or the handler's exit when it got none)."""
        if not self.ended:
            self.ended = True
            if self.metrics is not None:
                self.metrics._end(self)
            if self.slot is not None:
                self.slot.release()


@contextmanager
def arrived(metrics: EngineMetrics | None) -> Iterator[RunningRequest]:
    """A request from its arrival to the handler's exit (it ends there if its answer did not end it)."""
    request = RunningRequest(metrics)
    if metrics is not None:
        with metrics.lock:
            metrics._add("waiting", 1)
    try:
        yield request
    finally:
        request.end()


def own_labels(engine: str, model: str) -> dict[str, str]:
    """The labels rank 0 of a plain launch puts on its metrics (vLLM: the model and engine index 0; SGLang: the
    model, a unified engine and rank 0 of every parallel group)."""
    if engine == "vllm":
        return {"model_name": model, "engine": "0"}
    return {"model_name": model, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
