"""The generated monitoring (spark_llm.plan.monitoring) against a real Prometheus (Debian's, `tools/system-deps.sh`)
scraping a stand-in vLLM engine, all on loopback: the config loads, every metric a rule reads returns series, and a
wedged engine (the wedge knob: a request runs and no token comes) fires the wedge rule within twice its `for:`,
which clears once the engine answers again; `spark-llm top`'s view of it is Prometheus's own answers.
On the sim's head, with the stack's Prometheus resource: tests/integration/test_router.py."""

from __future__ import annotations

import json
import math
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spark_llm.config import parse
from spark_llm.ops.prometheus import Prometheus
from spark_llm.ops.render import render_text
from spark_llm.ops.top import read_view, view_renderable
from spark_llm.plan.deployment import LAUNCH_TEMPLATE
from spark_llm.plan.monitoring import MonitoringSettings, alert_rules, prometheus_config
from spark_llm.plan.monitoring.scrape import ENGINE_JOB
from spark_llm.plan.stack import StackPlan, build_stack
from tests.conftest import dual_spark_raw
from tests.unit.sim.standin_group import SERVED_MODEL_NAME, free_port, http_get, http_post, wait_until

WEDGE_SECONDS = 6  # the supervisor's smallest wedge bound: the rule's window 3 s, its `for:` 3 s


def stack() -> StackPlan:
    raw = dual_spark_raw()
    raw["model"]["name"] = SERVED_MODEL_NAME
    raw["engine"] = {"kind": "vllm", "version": "0.16.0"}
    raw["supervisor"] = {"wedgeSeconds": WEDGE_SECONDS}
    return build_stack(parse(raw), LAUNCH_TEMPLATE.read_text())


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[dict, dict], str]]:
    """Starts Prometheus on a free loopback port with a config and its rules; gives its URL."""
    started: list[subprocess.Popen] = []

    def start(config: dict, rules: dict) -> str:
        (tmp_path / "prometheus.yml").write_text(json.dumps(config))
        (tmp_path / config["rule_files"][0]).write_text(json.dumps(rules))
        port = free_port()
        argv = [
            "prometheus",
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        with (tmp_path / "prometheus.log").open("wb") as log:
            started.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_get(f"{url}/-/ready")[0] == 200, "Prometheus to be ready")
        return url

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=30)


def query(url: str, expr: str) -> list[dict]:
    status, body = http_get(f"{url}/api/v1/query?query={urllib.parse.quote(expr)}")
    assert status == 200, body
    return json.loads(body)["data"]["result"]


def complete_slowly(url: str) -> int:
    """A completion that may be held for as long as the wedge lasts (http_post gives up after 5 s)."""
    body = json.dumps({"prompt": "hi", "max_tokens": 3}).encode()
    request = urllib.request.Request(f"{url}/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status


def alerts(url: str) -> dict[str, dict]:
    status, body = http_get(f"{url}/api/v1/alerts")
    assert status == 200, body
    return {a["labels"]["alertname"]: a for a in json.loads(body)["data"]["alerts"]}


def test_the_generated_rules_read_live_series_and_a_wedge_fires_within_twice_its_for(
    new_vllm_group, prometheus, tmp_path: Path
) -> None:
    wedge = tmp_path / "standin-wedge"
    group = new_vllm_group(1, version="0.16.0")
    head = group.start(0, env={"STANDIN_WEDGE_WHILE_FILE": str(wedge)})
    wait_until(lambda: head.health() == 200, "the stand-in to be healthy")

    plan = stack()
    config = prometheus_config(plan, MonitoringSettings(scrape_seconds=1, evaluation_seconds=1))
    # The engine's job as generated, its address the stand-in's (the plan's is the head's API on a real stack).
    [engine] = [job for job in config["scrape_configs"] if job["job_name"] == ENGINE_JOB]
    engine["static_configs"][0]["targets"] = [f"127.0.0.1:{head.port}"]
    config["scrape_configs"] = [engine]
    rules = alert_rules(plan, scrape=1)
    url = prometheus(config, rules)
    wait_until(lambda: bool(query(url, f'up{{job="{ENGINE_JOB}"}} == 1')), "the engine's target to be up")
    assert http_post(f"{head.url}/v1/completions", {"prompt": "hi", "max_tokens": 3})[0] == 200

    # Every engine metric a rule reads returns a series, with the stack's labels on it.
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"] if ENGINE_JOB in r["expr"]]
    selectors = {m for e in exprs for m in re.findall(r"[a-z_:]+\{[^}]*\}", e)}
    assert len(selectors) == 3  # up, the running requests, the generated tokens
    for selector in selectors:
        wait_until(lambda s=selector: bool(query(url, s)), f"{selector} to return series")
        assert query(url, selector)[0]["metric"]["release"] == "0.16.0"
    wedged_rule = next(r for g in rules["groups"] for r in g["rules"] if r["alert"] == "SparkLlmEngineWedged")
    hold = int(wedged_rule["for"].rstrip("s"))

    wedge.touch()
    answered: list[int] = []
    held = threading.Thread(target=lambda: answered.append(complete_slowly(head.url)))
    held.start()
    since = time.monotonic()
    wait_until(
        lambda: alerts(url).get("SparkLlmEngineWedged", {}).get("state") == "firing",
        "the wedge alert to fire",
        timeout=2 * hold + 2,  # two evaluations of slack on a loaded machine
    )
    fired = time.monotonic() - since
    firing = alerts(url)["SparkLlmEngineWedged"]
    assert firing["labels"]["model"] == SERVED_MODEL_NAME and firing["labels"]["node"] == "spark-1"
    assert f"spark-llm status --model {SERVED_MODEL_NAME}" in firing["annotations"]["description"]
    assert fired <= 2 * hold + 2
    assert "SparkLlmEngineDown" not in alerts(url)

    # `spark-llm top` at this instant: the held request runs, and every number is Prometheus's own answer to the
    # panel's query at the view's instant; the firing alert is listed, with what to do.
    served = Prometheus(url, "unused")  # (no web config on this Prometheus: the credential is not asked for)
    view = read_view(served, plan, time.time())
    assert view.models[SERVED_MODEL_NAME]["running"] == 1.0
    for panel in (p for p in view.panels if p.by == "model"):
        [answer] = served.query(panel.expr, view.at)
        assert answer.labels == {"model": SERVED_MODEL_NAME}
        shown = view.models[SERVED_MODEL_NAME][panel.key]
        assert shown == answer.value or (math.isnan(shown) and math.isnan(answer.value)), panel.key
    assert [(a.name, a.state) for a in view.alerts] == [("SparkLlmEngineWedged", "firing")]
    text = render_text(view_renderable(view, url))
    assert "SparkLlmEngineWedged" in text and f"spark-llm status --model {SERVED_MODEL_NAME}" in text

    wedge.unlink()
    held.join(timeout=30)
    assert answered == [200]  # held, never dropped: answered once the engine came back
    wait_until(lambda: "SparkLlmEngineWedged" not in alerts(url), "the wedge alert to clear once tokens come")
