"""The numbers to look at, generated from the stack: one list of panels that `spark-llm top` shows and the Grafana
dashboard draws (dashboard.py), so the two never disagree.

A model's panel is one PromQL expression per model, each in its release's own metric names (the catalogs'
roles), joined by `or`: one panel reads vLLM and SGLang alike, one series per model. A node's panel reads the node
exporter and the head's agent, one series per node. Every expression is checked against the sim's live Prometheus
in a test (each must return series).
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template

from spark_llm.config.metric_catalog import Role, load_metrics
from spark_llm.group import agent_metrics as agent
from spark_llm.plan.monitoring.scrape import ENGINE_JOB, NODE_JOB
from spark_llm.plan.stack import StackPlan

# The windows rates and quantiles are taken over: at least four scrapes at the longest interval a test uses (15 s).
RATE_WINDOW = "1m"
QUANTILE_WINDOW = "5m"


@dataclass(frozen=True)
class Panel:
    key: str
    """Its name in `top --json` and the dashboard's panel id."""
    title: str
    column: str
    """Its short heading in `top`'s tables."""
    expr: str
    unit: str
    """Grafana's unit id (short, s, percentunit, bytes, watt, celsius, hertz, reqps)."""
    by: str
    """The label each series is told apart by: `model` or `node`."""
    gpu: bool = False
    """Read from nvidia-smi by the head's agent: no series on a node without a GPU (the sim)."""


# Each model's expression: `$series` its release's series for the role, `$select` the stack's labels of its target.
RATE = f"sum by (model) (rate($series{{$select}}[{RATE_WINDOW}]))"
GAUGE = "sum by (model) ($series{$select})"
QUANTILE = f"histogram_quantile($q, sum by (model, le) (rate($series{{$select}}[{QUANTILE_WINDOW}])))"


def per_model(stack: StackPlan, role: Role, shape: str, **more: str) -> str:
    """One expression per model in its release's names (`shape`: RATE, GAUGE, QUANTILE), joined by `or`."""
    return " or ".join(
        Template(shape).substitute(
            series=load_metrics(plan.config.engine.kind, plan.config.engine.version).metric(role).samples[0],
            select=f'job="{ENGINE_JOB}",model="{plan.model_name}"',
            **more,
        )
        for plan in stack.models.values()
    )


def model_panels(stack: StackPlan) -> list[Panel]:
    def panel(key: str, title: str, column: str, role: Role, shape: str, unit: str, **more: str) -> Panel:
        return Panel(key, title, column, per_model(stack, role, shape, **more), unit, "model")

    return [
        panel("tokens_per_second", "Generated tokens/s", "tok/s", Role.GENERATION_TOKENS, RATE, "short"),
        panel("prompt_tokens_per_second", "Prompt tokens/s", "prompt/s", Role.PROMPT_TOKENS, RATE, "short"),
        panel("running", "Running requests", "running", Role.RUNNING, GAUGE, "short"),
        panel("waiting", "Waiting requests", "waiting", Role.WAITING, GAUGE, "short"),
        panel("ttft_p50", "Time to first token, p50", "TTFT p50", Role.TTFT, QUANTILE, "s", q="0.5"),
        panel("ttft_p95", "Time to first token, p95", "TTFT p95", Role.TTFT, QUANTILE, "s", q="0.95"),
        panel("kv_cache", "KV-cache use", "KV cache", Role.KV_CACHE, GAUGE, "percentunit"),
    ]


def node_panels() -> list[Panel]:
    node = f'job="{NODE_JOB}"'
    return [
        Panel("memory_available", "Memory available", "available", f"node_memory_MemAvailable_bytes{{{node}}}", "bytes",
              "node"),
        Panel("page_cache", "Page cache", "page cache", f"node_memory_Cached_bytes{{{node}}}", "bytes", "node"),
        Panel("gpu_power", "GPU power", "GPU power", f"{agent.GPU_POWER}{{{node}}}", "watt", "node", gpu=True),
        Panel("gpu_temperature", "GPU temperature", "GPU temp", f"{agent.GPU_TEMPERATURE}{{{node}}}", "celsius", "node",
              gpu=True),
        Panel("gpu_sm_clock", "GPU SM clock", "SM clock", f"{agent.GPU_SM_CLOCK}{{{node}}}", "hertz", "node", gpu=True),
    ]  # fmt: skip


def panels(stack: StackPlan) -> list[Panel]:
    """Every panel: the models' first, then the nodes'."""
    return [*model_panels(stack), *node_panels()]
