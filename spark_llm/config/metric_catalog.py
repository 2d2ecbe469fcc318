"""The engines' Prometheus metrics as data: every metric one release of SGLang or vLLM defines in its main stat
loggers (name, type, label names, whether an option turns it on, a rename the engine announces), read from that
release's sources by tools/engine_metrics.py into `spark_llm/config/engine_catalogs/<engine>-<version>.metrics.json`
(provenance in that directory's README).

What the monitoring generates (scrape config, alert rules, panels) names metrics through `Role`s, so one rule
reads vLLM's `vllm:num_requests_running` and SGLang's `sglang:num_running_reqs` alike, and a rename between
releases (vLLM 0.9.2's `gpu_cache_usage_perc` -> `kv_cache_usage_perc`) is looked up, not remembered.

Pure: no Pulumi, no I/O except reading the packaged catalogs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib import resources

from spark_llm.config.engine_catalog import CATALOG_DIR, ENGINE_NAMES, known_versions

METRICS_SUFFIX = ".metrics.json"
# SGLang's collectors whose metrics a plain serving engine has (the scheduler's and the tokenizer manager's); the
# others (hierarchical cache storage, encoder disaggregation, expert dispatch) come with options spark-llm does
# not turn on.
SERVING_COLLECTORS = ("SchedulerMetricsCollector", "TokenizerMetricsCollector")


class Role(Enum):
    """What a metric means, whichever engine serves it."""

    RUNNING = "running requests"
    WAITING = "waiting requests"
    PROMPT_TOKENS = "prompt tokens"
    GENERATION_TOKENS = "generated tokens"
    TTFT = "time to first token"
    INTER_TOKEN = "inter-token latency"
    E2E = "request latency"
    KV_CACHE = "KV-cache use"
    REQUESTS = "finished requests"


# Each role's metric name per engine, the newest spelling first; `metric` takes the first the release defines.
ROLE_NAMES: dict[Role, dict[str, tuple[str, ...]]] = {
    Role.RUNNING: {"vllm": ("vllm:num_requests_running",), "sglang": ("sglang:num_running_reqs",)},
    Role.WAITING: {"vllm": ("vllm:num_requests_waiting",), "sglang": ("sglang:num_queue_reqs",)},
    Role.PROMPT_TOKENS: {"vllm": ("vllm:prompt_tokens",), "sglang": ("sglang:prompt_tokens_total",)},
    Role.GENERATION_TOKENS: {"vllm": ("vllm:generation_tokens",), "sglang": ("sglang:generation_tokens_total",)},
    Role.TTFT: {"vllm": ("vllm:time_to_first_token_seconds",), "sglang": ("sglang:time_to_first_token_seconds",)},
    Role.INTER_TOKEN: {
        "vllm": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "sglang": ("sglang:inter_token_latency_seconds",),
    },
    Role.E2E: {"vllm": ("vllm:e2e_request_latency_seconds",), "sglang": ("sglang:e2e_request_latency_seconds",)},
    Role.KV_CACHE: {
        "vllm": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "sglang": ("sglang:token_usage",),
    },
    Role.REQUESTS: {"vllm": ("vllm:request_success",), "sglang": ("sglang:num_requests_total",)},
}


class MetricCatalogError(ValueError):
    """No metric catalog for the engine and version, or a role the release does not define."""


@dataclass(frozen=True)
class Metric:
    """One metric as the engine's code defines it."""

    name: str
    type: str
    """gauge, counter, histogram or summary."""
    labels: tuple[str, ...] | None
    """Its label names (None: the code builds them in a way the extractor does not follow)."""
    conditional: bool
    """Defined under an `if`: an option or a feature turns it on."""
    collector: str | None = None
    renamed_to: str | None = None

    @property
    def family(self) -> str:
        """The name on its `# TYPE` line in Prometheus's text format (0.0.4), as prometheus_client writes it: a
        counter's ends in `_total`, whether or not the engine spelled it (OpenMetrics, which prometheus_client
        also serves when asked, drops it there)."""
        return f"{self.name.removesuffix('_total')}_total" if self.type == "counter" else self.name

    @property
    def samples(self) -> tuple[str, ...]:
        """The series names it exposes (`_created` left out)."""
        if self.type == "counter":
            return (self.family,)
        if self.type == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        if self.type == "summary":
            return (f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


@dataclass(frozen=True)
class MetricCatalog:
    engine: str
    version: str
    metrics: dict[str, Metric]

    def served(self) -> list[Metric]:
        """What a plain serving engine of this release exposes: every metric no option turns on, with known labels
        (in SGLang, the scheduler's and the tokenizer manager's)."""
        return [
            m
            for m in self.metrics.values()
            if not m.conditional
            and m.labels is not None
            and (self.engine != "sglang" or m.collector in SERVING_COLLECTORS)
        ]

    def metric(self, role: Role) -> Metric:
        """The release's metric for `role` (raises MetricCatalogError when it defines none)."""
        served = {m.name: m for m in self.served()}
        for name in ROLE_NAMES[role][self.engine]:
            if name in served:
                return served[name]
        raise MetricCatalogError(f"{ENGINE_NAMES[self.engine]} {self.version} serves no metric for {role.value}")


@cache
def load_metrics(engine: str, version: str) -> MetricCatalog:
    """The packaged metric catalog of one release (raises MetricCatalogError when there is none)."""
    name = f"{engine}-{version}{METRICS_SUFFIX}"
    path = resources.files("spark_llm.config").joinpath(CATALOG_DIR).joinpath(name)
    if not path.is_file():
        known = ", ".join(known_versions(engine)) if engine in ENGINE_NAMES else ""
        raise MetricCatalogError(f"no metric catalog for {engine} {version}" + (f"; known: {known}" if known else ""))
    data = json.loads(path.read_text())
    metrics = {
        entry["name"]: Metric(
            name=entry["name"],
            type=entry["type"],
            labels=None if entry["labels"] is None else tuple(entry["labels"]),
            conditional=entry["conditional"],
            collector=entry.get("collector"),
            renamed_to=entry.get("renamed_to"),
        )
        for entry in data["metrics"]
    }
    return MetricCatalog(engine=data["engine"], version=data["version"], metrics=metrics)
