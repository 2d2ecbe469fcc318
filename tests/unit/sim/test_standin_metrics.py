"""The stand-in's GET /metrics (sim/engine/standin_engine/metrics.py): the real release's metric names and types
(its metric catalog), in Prometheus's text format, moving as it serves: what the monitoring's scrape, rules and
panels are checked against on the sim (issue 42, item 3)."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from spark_llm.config.metric_catalog import Role, load_metrics
from tests.unit.sim.standin_group import (
    SERVED_MODEL_NAME,
    EngineGroup,
    engine_env,
    http_get,
    http_post,
    post_head,
    wait_until,
)

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def scrape(url: str) -> tuple[dict[str, str], list[tuple[str, dict[str, str], float]]]:
    """(each family's type, every sample) from an exposition."""
    status, body = http_get(f"{url}/metrics")
    assert status == 200, body[:300]
    types: dict[str, str] = {}
    samples = []
    for line in body.decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split(" ")
            types[family] = kind
        elif line and not line.startswith("#"):
            match = SAMPLE.match(line)
            assert match, line
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match["labels"] or ""))
            samples.append((match["name"], labels, float(match["value"])))
    return types, samples


def value(samples: list, name: str, **labels: str) -> float:
    """The sum over the series of `name` whose labels include `labels`."""
    return sum(v for n, got, v in samples if n == name and labels.items() <= got.items())


def test_sglang_serves_its_release_metrics_with_enable_metrics_and_they_move_as_it_serves(
    new_group: Callable[..., EngineGroup],
) -> None:
    catalog = load_metrics("sglang", "0.5.23")
    group = new_group(1, extra_args=("--enable-metrics",))
    head = group.start(0)
    wait_until(lambda: head.health() == 200, "the head to be healthy")

    types, before = scrape(head.url)
    for metric in catalog.served():
        assert types.get(metric.family) == metric.type, metric.name
    assert not set(types) - {m.family for m in catalog.served()}  # nothing of its own, nothing of another release
    running = catalog.metric(Role.RUNNING)
    assert [(labels, v) for n, labels, v in before if n == running.name] == [
        (
            {
                "model_name": SERVED_MODEL_NAME,
                "engine_type": "unified",
                "tp_rank": "0",
                "pp_rank": "0",
                "moe_ep_rank": "0",
            },
            0.0,
        )
    ]

    answers = [
        post_head(group, "/v1/completions", {"prompt": "The capital of France is", "max_tokens": n}) for n in (5, 3)
    ]
    _, after = scrape(head.url)
    generated = catalog.metric(Role.GENERATION_TOKENS).samples[0]
    prompt = catalog.metric(Role.PROMPT_TOKENS).samples[0]
    assert value(after, generated) == sum(a["usage"]["completion_tokens"] for a in answers)
    assert value(after, prompt) == sum(a["usage"]["prompt_tokens"] for a in answers)
    assert value(after, prompt, model_name=SERVED_MODEL_NAME, is_streaming="false") == value(after, prompt)
    assert value(after, "sglang:time_to_first_token_seconds_count") == 2
    assert value(after, "sglang:e2e_request_latency_seconds_count") == 2
    assert value(after, "sglang:time_to_first_token_seconds_bucket", le="+Inf") == 2
    assert value(after, catalog.metric(Role.REQUESTS).samples[0]) == 2
    assert value(after, running.name) == 0


def test_sglang_without_enable_metrics_has_no_metrics_route(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(1)
    head = group.start(0)
    wait_until(lambda: head.health() == 200, "the head to be healthy")
    assert http_get(f"{head.url}/metrics")[0] == 404


RENDER = """
import sys
from standin_engine.metrics import EngineMetrics, own_labels
print(EngineMetrics(sys.argv[1], sys.argv[2], own_labels(sys.argv[1], "m"), 4096).render())
"""


def test_vllm_0_11_serves_its_renamed_metrics_by_their_new_names_only():
    # The old names only behind --show-hidden-metrics-for-version, which a deployment does not set.
    rendered = subprocess.run(
        [sys.executable, "-c", RENDER, "vllm", "0.11.0"],
        env=engine_env(None),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    families = set(re.findall(r"^# TYPE (\S+) ", rendered, re.M))
    assert "vllm:kv_cache_usage_perc" in families and "vllm:gpu_cache_usage_perc" not in families
    assert families == {m.family for m in load_metrics("vllm", "0.11.0").served()}
    assert 'vllm:num_requests_running{model_name="m",engine="0"} 0.0' in rendered.splitlines()


def test_a_wedged_vllm_head_shows_a_request_running_and_no_token_coming(new_vllm_group, tmp_path: Path) -> None:
    catalog = load_metrics("vllm", "0.16.0")
    wedge = tmp_path / "standin-wedge"
    group = new_vllm_group(1, version="0.16.0")
    head = group.start(0, env={"STANDIN_WEDGE_WHILE_FILE": str(wedge)})
    wait_until(lambda: head.health() == 200, "the head to be healthy")
    types, _ = scrape(head.url)
    assert {m.family: m.type for m in catalog.served()} == types
    assert http_post(f"{head.url}/v1/completions", {"prompt": "hi", "max_tokens": 4})[0] == 200
    generated = catalog.metric(Role.GENERATION_TOKENS).samples[0]
    _, served = scrape(head.url)
    assert value(served, generated, model_name=SERVED_MODEL_NAME, engine="0") == 4
    assert value(served, "vllm:request_success_total", finished_reason="length") == 1

    wedge.touch()
    held = threading.Thread(target=http_post, args=(f"{head.url}/v1/completions", {"prompt": "hi", "max_tokens": 4}))
    held.start()
    wait_until(lambda: value(scrape(head.url)[1], "vllm:num_requests_running") == 1, "the held request to run")
    _, wedged = scrape(head.url)
    assert value(wedged, generated) == 4  # running, and no token comes: the wedge signal
    assert value(wedged, "vllm:kv_cache_usage_perc") > 0  # its prompt and room to generate, scheduled
    wedge.unlink()
    held.join(timeout=10)
    _, done = scrape(head.url)
    assert value(done, "vllm:num_requests_running") == 0 and value(done, generated) == 8


def test_beyond_the_batch_limit_a_request_waits_behind_a_wedged_one(
    new_group: Callable[..., EngineGroup], tmp_path: Path
) -> None:
    wedge = tmp_path / "standin-wedge"
    group = new_group(1, extra_args=("--enable-metrics", "--max-running-requests", "1"))
    head = group.start(0, env={"STANDIN_WEDGE_WHILE_FILE": str(wedge)})
    wait_until(lambda: head.health() == 200, "the head to be healthy")
    wedge.touch()
    asks = [
        threading.Thread(target=http_post, args=(f"{head.url}/v1/completions", {"prompt": "hi", "max_tokens": 2}))
        for _ in range(2)
    ]
    for ask in asks:
        ask.start()

    def counts() -> tuple[float, float]:
        _, samples = scrape(head.url)
        return value(samples, "sglang:num_running_reqs"), value(samples, "sglang:num_queue_reqs")

    wait_until(lambda: counts() == (1, 1), "one request running (held) and one waiting for its place")
    _, held = scrape(head.url)
    assert value(held, "sglang:token_usage") > 0 and value(held, "sglang:generation_tokens_total") == 0
    wedge.unlink()
    for ask in asks:
        ask.join(timeout=10)
    assert counts() == (0, 0)
    assert value(scrape(head.url)[1], "sglang:generation_tokens_total") == 4
