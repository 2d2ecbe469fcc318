#!/usr/bin/env python3
"""What spark-llm:monitoring costs and how fast it tells (issue 42), on the simulated cluster with two models behind
the router: the engine's request latency with and without Prometheus scraping it (p50/p99, side by side, windows
taken in turn: ABAB), Prometheus's memory on the head over `--minutes` of scraping both models under load (goal
after an hour: <= 300 MB, unified memory being the model's), and the seconds from a wedged engine to the wedge
alert firing, beside the rule's `for:`.

Usage:   . tools/env.sh && python bench/monitoring_bench.py [--minutes 60] [--windows 4] [--window-s 30]
                                                              [--scrape-seconds 15] [--wedge-seconds 120]
Outputs: bench/results/monitoring-<UTC timestamp>.json and a short table on stdout.

The stack: bench/steady_client.two_models (the stand-in across head and worker, a small one on the head) with the
router (`sim up --load-router`) and spark-llm:monitoring (`--load-monitoring`), the big model's engine holding
requests while a file exists on the head (STANDIN_WEDGE_WHILE_FILE) and the supervisor's wedge bound
`--wedge-seconds`. Without scraping is Prometheus's container stopped (`docker stop` on the head); with, started
again. The memory is Prometheus's own `process_resident_memory_bytes` and the container's (docker stats) once a
minute while a client asks each model every 100 ms. Talks only to the sim's containers.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from contextlib import ExitStack

import yaml
from simbench import REPO, bench_parser, bench_stack, sh, sim_up, write_result
from steady_client import SMALL, SteadyClient, two_models

sys.path.insert(0, str(REPO))
from spark_llm.ops.prometheus import Prometheus, PrometheusError  # noqa: E402

BIG = "spark-llm/standin-model"
PROMETHEUS = "spark-llm-prometheus"
WEDGE_FILE_ON_NODE = "/root/spark-llm/cache/standin-wedge"
WEDGE_FILE_IN_CONTAINER = "/root/.cache/standin-wedge"
ALERT_DEADLINE_S = 600


def head_container() -> str:
    return f"{json.loads((REPO / '.sim' / 'state.json').read_text())['prefix']}-head"


def on_head(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", head_container(), *cmd], capture_output=True, text=True, check=False)


def configure(config_file, scrape_seconds: int, wedge_seconds: int) -> None:
    document = yaml.safe_load(config_file.read_text())
    config = document["config"]
    two_models(config)
    config["spark-llm:models"][0]["engine"].setdefault("env", {})["STANDIN_WEDGE_WHILE_FILE"] = WEDGE_FILE_IN_CONTAINER
    config["spark-llm:monitoring"]["scrapeSeconds"] = scrape_seconds
    config.setdefault("spark-llm:supervisor", {}).update(wedgeSeconds=wedge_seconds, maxRestarts=100)
    config_file.write_text(yaml.safe_dump(document, sort_keys=False))


def latency_windows(url: str, key: str, windows: int, window_s: float) -> dict:
    """ABAB windows of a client asking the big model every 100 ms: with Prometheus scraping, then without."""
    seen: dict[str, list[dict]] = {"with_scraping": [], "without_scraping": []}
    for _ in range(windows):
        for name, action in (("with_scraping", "start"), ("without_scraping", "stop")):
            on_head("docker", action, PROMETHEUS)
            time.sleep(2)  # the container started or stopped before the window opens
            with SteadyClient(url, BIG, key) as client:
                time.sleep(window_s)  # the window: as long as asked, a request every 100 ms
            seen[name].append(client.summary())
    on_head("docker", "start", PROMETHEUS)
    return seen


def wait_serving(prometheus: Prometheus, deadline_s: float = 120) -> None:
    """Until Prometheus answers again after its container started (its TSDB replays its WAL first)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            prometheus.targets()
            return
        except PrometheusError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)  # the poll interval inside the deadline


def memory_over(prometheus: Prometheus, url: str, key: str, minutes: float) -> list[dict]:
    """Prometheus's memory once a minute for `minutes`, a client on each model all along."""
    samples = []
    started = time.monotonic()
    with ExitStack() as running:
        for model in (BIG, SMALL):
            running.enter_context(SteadyClient(url, model, key))
        while True:
            elapsed = time.monotonic() - started
            rss = prometheus.own_metric("process_resident_memory_bytes") or 0.0
            series = prometheus.own_metric("prometheus_tsdb_head_series")
            stats = on_head("docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", PROMETHEUS).stdout.strip()
            samples.append({"minute": round(elapsed / 60, 1), "rss_bytes": rss, "head_series": series, "docker": stats})
            print(f"minute {elapsed / 60:5.1f}: RSS {rss / 2**20:.0f} MiB, {series:.0f} series, docker {stats}")
            if elapsed >= minutes * 60:
                return samples
            time.sleep(min(60.0, minutes * 60 - elapsed + 0.1))  # a sample a minute, the last at the end


def wedge_to_alert(prometheus: Prometheus, url: str, key: str) -> dict:
    """Seconds from the wedge file to SparkLlmEngineWedged firing for the big model, with the rule's `for:`."""
    rule = next(
        r for g in prometheus.rules() for r in g["rules"]
        if r["name"] == "SparkLlmEngineWedged" and r["labels"].get("model") == BIG
    )  # fmt: skip
    on_head("touch", WEDGE_FILE_ON_NODE)
    started = time.monotonic()
    try:
        with SteadyClient(url, BIG, key, timeout_s=120):  # requests held: running, no token
            while time.monotonic() - started < ALERT_DEADLINE_S:
                firing = [a for a in prometheus.alerts() if a.name == "SparkLlmEngineWedged" and a.state == "firing"]
                if firing:
                    break
                time.sleep(0.5)  # the poll interval inside the deadline
        fired = time.monotonic() - started if firing else None
    finally:
        on_head("rm", "-f", WEDGE_FILE_ON_NODE)
    return {"for_s": rule["duration"], "fired_after_s": round(fired, 1) if fired else None}


def main() -> int:
    parser = bench_parser(__doc__, repeat=1)
    parser.add_argument("--minutes", type=float, default=60, help="minutes of scraping before the memory's last sample")
    parser.add_argument("--windows", type=int, default=4, help="latency windows each way (4)")
    parser.add_argument("--window-s", type=float, default=30, help="seconds a latency window lasts (30)")
    parser.add_argument("--scrape-seconds", type=int, default=15)
    parser.add_argument("--wedge-seconds", type=int, default=120, help="supervisor.wedgeSeconds (120)")
    args = parser.parse_args()
    sim_up(args.workers)
    sh([str(REPO / "sim/sim"), "up", "--load-router", "--load-monitoring"], dict(os.environ))
    key, password = f"sk-bench-{secrets.token_hex(12)}", f"pw-{secrets.token_hex(12)}"
    with bench_stack() as (env, stack_args, config):
        configure(config, args.scrape_seconds, args.wedge_seconds)
        for name, value in (("apiKey", key), ("monitoringPassword", password)):
            cmd = ["pulumi", "config", "set", "--secret", name, *stack_args]  # the value on stdin
            subprocess.run(cmd, input=value, text=True, env=env, cwd=REPO, check=True, capture_output=True)
        sh(["pulumi", "up", "--yes", "--skip-preview", *stack_args], env)
        outputs = json.loads(sh(["pulumi", "stack", "output", "--json", *stack_args[:2]], env).stdout)
        url, prometheus = outputs["endpoint"], Prometheus(outputs["monitoring"], password, timeout=20)
        try:
            latency = latency_windows(url, key, args.windows, args.window_s)
            wait_serving(prometheus)
            wedge = wedge_to_alert(prometheus, url, key)
            memory = memory_over(prometheus, url, key, args.minutes)
        finally:
            on_head("rm", "-f", WEDGE_FILE_ON_NODE)
            sh(["pulumi", "destroy", "--yes", "--skip-preview", *stack_args], env, check=False)

    def p(name: str, q: str) -> list[float]:
        return [w["latency_ms"][q] for w in latency[name]]

    result = {
        "scrape_seconds": args.scrape_seconds,
        "latency_ms": {
            name: {"p50": p(name, "p50"), "p99": p(name, "p99"), "failed": sum(w["failed"] for w in latency[name])}
            for name in latency
        },
        "latency_windows": latency,
        "wedge_to_alert": {**wedge, "wedge_seconds": args.wedge_seconds},
        "prometheus_memory": {
            "minutes": args.minutes,
            "last_rss_mib": round(memory[-1]["rss_bytes"] / 2**20, 1),
            "max_rss_mib": round(max(m["rss_bytes"] for m in memory) / 2**20, 1),
            "goal_mib": 300,
            "samples": memory,
        },
    }
    out = write_result("monitoring", result)
    for name, values in result["latency_ms"].items():
        print(f"{name:17s} p50 {values['p50']} ms  p99 {values['p99']} ms  failed {values['failed']}")
    print(f"wedge -> alert: {wedge['fired_after_s']} s (for: {wedge['for_s']} s)")
    print(f"Prometheus RSS after {args.minutes:g} min: {result['prometheus_memory']['last_rss_mib']} MiB; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
