"""The head's agent's textfile (spark_llm.group.agent_metrics) and the alert rules that read it
(spark_llm.plan.monitoring.rules), checked by Prometheus's own tool (promtool, Debian's `prometheus`): the file
parses and passes its lint, and each rule fires on the series that should fire it, with its labels and words."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from spark_llm.config import parse
from spark_llm.group import agent_metrics as agent
from spark_llm.plan.deployment import LAUNCH_TEMPLATE
from spark_llm.plan.monitoring import alert_rules
from spark_llm.plan.stack import build_stack
from tests.conftest import dual_spark_raw

GROUP = agent.GroupReading(
    model="qwen",
    state="whole",
    restarts=2,
    budget_left=1,
    transports=((0, "spark-1", "IB"), (1, "spark-2", "Socket")),
    phases=(("spark-1", "weights", 412.5), ("spark-2", "graph", 61.0)),
)
NODES = [
    agent.NodeReading("spark-1", drift=False, gpu_power_watts=38.5, gpu_temperature_celsius=47, gpu_sm_clock_mhz=2405),
    agent.NodeReading("spark-2"),  # unreachable this round: no reading, no sample
]


def test_the_textfile_parses_and_passes_prometheus_lint():
    text = agent.render([GROUP], NODES, now=1_796_000_000.0)
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lines = text.splitlines()
    assert 'spark_llm_group_state{model="qwen",state="whole"} 1.0' in lines
    assert 'spark_llm_group_state{model="qwen",state="gave_up"} 0.0' in lines
    assert 'spark_llm_group_restarts_total{model="qwen"} 2.0' in lines
    assert 'spark_llm_nccl_transport{model="qwen",rank="1",node="spark-2",transport="Socket"} 1.0' in lines
    assert 'spark_llm_gpu_sm_clock_hertz{node="spark-1"} 2405000000.0' in lines
    assert not [line for line in lines if 'node="spark-2"' in line and "gpu" in line]
    assert "spark_llm_agent_last_write_timestamp_seconds 1796000000.0" in lines


def test_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path):
    agent.write(str(tmp_path), "spark-llm.prom", "first\n")
    agent.write(str(tmp_path), "spark-llm.prom", "second\n")
    assert [p.name for p in tmp_path.iterdir()] == ["spark-llm.prom"]
    assert (tmp_path / "spark-llm.prom").read_text() == "second\n"
    assert (tmp_path / "spark-llm.prom").stat().st_mode & 0o777 == 0o644  # the exporter runs as another user


def _expected(annotations: dict, labels: dict, value: str) -> dict:
    """The rule's annotations as Prometheus renders them for one series."""

    def fill(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m[1]], text)
        return text.replace("{{ $value }}", value)

    return {key: fill(text) for key, text in annotations.items()}


def test_each_agent_rule_fires_on_the_series_that_should_fire_it(tmp_path: Path):
    stack = build_stack(parse(dual_spark_raw()), LAUNCH_TEMPLATE.read_text())
    rules = alert_rules(stack, " --stack dual-spark")
    (tmp_path / "rules.json").write_text(json.dumps(rules))
    agent_rules = {r["alert"]: r for g in rules["groups"] if g["name"] == "spark-llm-agent" for r in g["rules"]}
    series = {
        "SparkLlmNcclOnSockets": (
            {"model": "qwen", "rank": "1", "node": "spark-2", "transport": "Socket"},
            agent.NCCL_TRANSPORT,
            "1x10",
            "1",
        ),
        "SparkLlmRestartBudgetSpent": ({"model": "qwen", "state": "gave_up"}, agent.GROUP_STATE, "0 1x10", "1"),
        "SparkLlmGpuTemperatureHigh": ({"node": "spark-1"}, agent.GPU_TEMPERATURE, "95x10", "95"),
    }
    tests = []
    for name, (labels, metric, values, value) in series.items():
        rule = agent_rules[name]
        selector = metric + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
        tests.append(
            {
                "interval": "1m",
                "input_series": [{"series": selector, "values": values}],
                "alert_rule_test": [
                    {
                        "eval_time": "8m",
                        "alertname": name,
                        "exp_alerts": [
                            {
                                "exp_labels": {**labels, **rule["labels"]},
                                "exp_annotations": _expected(rule["annotations"], labels, value),
                            }
                        ],
                    }
                ],
            }
        )
    # The agent silent: its last write 10 minutes old; and a quiet healthy group fires nothing.
    tests.append(
        {
            "interval": "1m",
            "input_series": [
                # As scraped from the head's exporter: the target's `node` on the agent's own series.
                {"series": f'{agent.LAST_WRITE}{{node="spark-1"}}', "values": "0x20"},
                {"series": f'{agent.NCCL_TRANSPORT}{{model="q",rank="0",node="n",transport="IB"}}', "values": "1x20"},
            ],
            "alert_rule_test": [
                {
                    "eval_time": "10m",
                    "alertname": "SparkLlmAgentSilent",
                    "exp_alerts": [
                        {
                            "exp_labels": {"node": "spark-1", "severity": "warning"},
                            "exp_annotations": _expected(
                                agent_rules["SparkLlmAgentSilent"]["annotations"], {"node": "spark-1"}, ""
                            ),
                        }
                    ],
                },
                {"eval_time": "10m", "alertname": "SparkLlmNcclOnSockets", "exp_alerts": []},
            ],
        }
    )
    (tmp_path / "tests.json").write_text(json.dumps({"rule_files": ["rules.json"], "tests": tests}))
    checked = subprocess.run(["promtool", "test", "rules", "tests.json"], cwd=tmp_path, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout


def test_a_groups_reading_is_its_verdict_its_budget_and_its_last_starts_record():
    last_start = {
        "fabric": {"spark-1": {"transport": "IB"}, "spark-2": {"transport": "Socket", "problem": "sockets"}},
        "nodes": {"spark-2": [{"phase": "weights", "seconds": 12.5}], "spark-1": [{"phase": "server", "seconds": 3}]},
    }
    reading = agent.group_reading("qwen", "broken", 2, 1, ["spark-1", "spark-2"], last_start)
    assert reading.transports == ((0, "spark-1", "IB"), (1, "spark-2", "Socket"))
    assert reading.phases == (("spark-1", "server", 3.0), ("spark-2", "weights", 12.5))
    text = agent.render([reading], [], 1000.0)
    assert 'spark_llm_nccl_transport{model="qwen",rank="1",node="spark-2",transport="Socket"} 1.0' in text
    assert 'spark_llm_group_state{model="qwen",state="broken"} 1.0' in text
    assert 'spark_llm_group_restart_budget_left{model="qwen"} 1.0' in text
    # Before any start: no transport, no phase, the group's state all the same.
    empty = agent.group_reading("qwen", "whole", 0, 3, ["spark-1"], None)
    assert (empty.transports, empty.phases) == ((), ())
