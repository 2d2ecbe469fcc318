"""The engines' metric catalogs (spark_llm.config.metric_catalog): one per release the flag catalogs know, every
role the monitoring reads resolved in each, the renames the engines announce, and the extractor that wrote them
(tools/engine_metrics.py) on sources shaped like the engines' own."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spark_llm.config.engine_catalog import known_versions
from spark_llm.config.metric_catalog import ROLE_NAMES, MetricCatalogError, Role, load_metrics

ROOT = Path(__file__).resolve().parents[3]
RELEASES = [(engine, version) for engine in ("sglang", "vllm") for version in known_versions(engine)]


@pytest.mark.parametrize(("engine", "version"), RELEASES)
def test_every_release_has_a_metric_for_every_role(engine: str, version: str) -> None:
    catalog = load_metrics(engine, version)
    names = {role: catalog.metric(role).name for role in Role}
    assert len(set(names.values())) == len(Role), names  # no two roles read one metric
    assert catalog.metric(Role.RUNNING).type == "gauge"
    assert catalog.metric(Role.GENERATION_TOKENS).type == "counter"
    assert catalog.metric(Role.TTFT).type == "histogram"
    assert "model_name" in (catalog.metric(Role.TTFT).labels or ())


def test_vllm_announced_renames_are_recorded_where_the_old_name_still_exists():
    old = load_metrics("vllm", "0.11.0").metrics
    assert old["vllm:gpu_cache_usage_perc"].renamed_to == "vllm:kv_cache_usage_perc"
    assert old["vllm:gpu_cache_usage_perc"].conditional  # only behind --show-hidden-metrics-for-version
    assert old["vllm:time_per_output_token_seconds"].renamed_to == "vllm:inter_token_latency_seconds"
    for version in ("0.16.0", "0.33.0"):
        assert "vllm:gpu_cache_usage_perc" not in load_metrics("vllm", version).metrics
    # The role reads the new name in every release (0.11.0 serves both; the old one only behind an option).
    assert {load_metrics("vllm", v).metric(Role.KV_CACHE).name for v in known_versions("vllm")} == {
        "vllm:kv_cache_usage_perc"
    }


def test_counters_are_exposed_with_total_whether_or_not_the_engine_spelled_it():
    vllm = load_metrics("vllm", "0.33.0").metric(Role.PROMPT_TOKENS)
    sglang = load_metrics("sglang", "0.5.23").metric(Role.PROMPT_TOKENS)
    assert (vllm.name, vllm.family, vllm.samples) == (
        "vllm:prompt_tokens",
        "vllm:prompt_tokens_total",
        ("vllm:prompt_tokens_total",),
    )
    assert (sglang.name, sglang.family, sglang.samples) == (
        "sglang:prompt_tokens_total",
        "sglang:prompt_tokens_total",
        ("sglang:prompt_tokens_total",),
    )
    ttft = load_metrics("vllm", "0.33.0").metric(Role.TTFT)
    assert ttft.samples == tuple(f"vllm:time_to_first_token_seconds_{s}" for s in ("bucket", "sum", "count"))


def test_sglang_labels_come_from_where_the_engine_builds_its_collectors():
    catalog = load_metrics("sglang", "0.5.23")
    assert catalog.metric(Role.RUNNING).labels == ("model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank")
    assert catalog.metric(Role.TTFT).labels == ("model_name", "engine_type", "is_streaming")  # `[*labels.keys(), ...]`
    # 0.5.5 had no moe_ep_rank and no engine_type on the tokenizer's metrics.
    older = load_metrics("sglang", "0.5.5")
    assert older.metric(Role.RUNNING).labels == ("model_name", "engine_type", "tp_rank", "pp_rank")
    assert older.metric(Role.TTFT).labels == ("model_name",)
    # Served: only the scheduler's and the tokenizer's, never one whose labels were not found.
    assert all(m.labels is not None for m in catalog.served())
    assert {m.collector for m in catalog.served()} == {"SchedulerMetricsCollector", "TokenizerMetricsCollector"}


def test_an_unknown_release_names_the_known_ones():
    with pytest.raises(MetricCatalogError, match=r"no metric catalog for vllm 0\.1\.0; known: 0\.11\.0, 0\.16\.0"):
        load_metrics("vllm", "0.1.0")


def test_the_standin_moves_the_same_metrics_the_monitoring_reads():
    # The stand-in runs on the nodes without spark_llm: its own table, held equal here.
    read = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from standin_engine import metrics; print(json.dumps(metrics.ROLE_NAMES))",
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT / "sim" / "engine")},
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = {
        role: {engine: tuple(names) for engine, names in by.items()} for role, by in json.loads(read.stdout).items()
    }
    assert theirs == {role.name.lower(): names for role, names in ROLE_NAMES.items()}


# ---------- the extractor ----------

LOGGER = """
    class PrometheusStatLogger:
        _gauge_cls = Gauge
        _counter_cls = Counter

        def __init__(self, config):
            labelnames = ["model_name", "engine"]
            self.labelname_lora = "max_lora"
            self.gauge_running = self._gauge_cls(
                name="vllm:num_requests_running", documentation="Running.", labelnames=labelnames
            )
            self.counter_success = self._counter_cls(
                name="vllm:request_success", documentation="Done.", labelnames=labelnames + ["finished_reason"]
            )
            # Deprecated in 0.9.2 - Renamed as vllm:kv_cache_usage_perc
            if config.show_hidden:
                self.old = self._gauge_cls(
                    name="vllm:gpu_cache_usage_perc",
                    documentation="KV. " "DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
                    labelnames=labelnames,
                )
            self.lora = self._gauge_cls(name="vllm:lora_info", documentation="x", labelnames=[self.labelname_lora])
            self.unknown = self._gauge_cls(name="vllm:built", documentation="x", labelnames=make_labels())
"""


def _extractor():
    spec = importlib.util.spec_from_file_location("engine_metrics_tool", ROOT / "tools" / "engine_metrics.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_extractor_reads_names_types_labels_conditions_and_renames_from_source(tmp_path: Path):
    logger = tmp_path / "src" / "vllm" / "v1" / "metrics" / "loggers.py"
    logger.parent.mkdir(parents=True)
    logger.write_text(textwrap.dedent(LOGGER))
    artifact = tmp_path / "vllm-9.9.9.tar.gz"
    artifact.write_bytes(b"release")
    catalog = _extractor().catalog("vllm", "9.9.9", tmp_path / "src", artifact)
    by_name = {m["name"]: m for m in catalog["metrics"]}
    assert by_name["vllm:num_requests_running"] == {
        "name": "vllm:num_requests_running",
        "type": "gauge",
        "labels": ["model_name", "engine"],
        "conditional": False,
        "source": "vllm/v1/metrics/loggers.py:9",
    }
    assert by_name["vllm:request_success"]["type"] == "counter"
    assert by_name["vllm:request_success"]["labels"] == ["model_name", "engine", "finished_reason"]
    old = by_name["vllm:gpu_cache_usage_perc"]
    assert old["conditional"] and old["renamed_to"] == "vllm:kv_cache_usage_perc" and old["deprecated_in"] == "0.9.2"
    assert by_name["vllm:lora_info"]["labels"] == ["max_lora"]
    assert by_name["vllm:built"]["labels"] is None  # not guessed
    assert catalog["extracted_from"]["artifact"] == "vllm-9.9.9.tar.gz"
    assert len(catalog["extracted_from"]["sha256"]) == 64
    json.dumps(catalog)  # what the tool prints
