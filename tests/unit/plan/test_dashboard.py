"""The Grafana dashboard generated from the stack (spark_llm.plan.monitoring.dashboard): `top`'s panels each a time
series on the stack's Prometheus, the alerts listed, and provisioning files that hold no password."""

from __future__ import annotations

import json

import yaml

from spark_llm.config.router import EXAMPLE_IMAGE
from spark_llm.plan.monitoring import dashboard
from spark_llm.plan.monitoring.panels import panels
from tests.unit.ops.several_models import BIG, SMALL, two_models_raw
from tests.unit.plan.test_monitoring import monitored, stack_of


def two_models_monitored(raw: dict) -> dict:
    return monitored({**two_models_raw(raw), "router": {"image": EXAMPLE_IMAGE}, "apiKey": "sk-test"})


def test_every_panel_of_top_is_a_time_series_of_the_stacks_prometheus(raw_config):
    stack = stack_of(two_models_monitored(raw_config))
    board = dashboard.dashboard(stack, "dual-spark")
    assert (board["uid"], board["title"]) == ("spark-llm-dual-spark", "spark-llm: dual-spark")
    series = [p for p in board["panels"] if p["type"] == "timeseries"]
    assert [p["targets"][0]["expr"] for p in series] == [p.expr for p in panels(stack)]
    assert {p["datasource"]["uid"] for p in board["panels"]} == {dashboard.DATASOURCE_UID}
    tokens = next(p for p in series if p["title"] == "Generated tokens/s")
    assert f'model="{BIG}"' in tokens["targets"][0]["expr"] and f'model="{SMALL}"' in tokens["targets"][0]["expr"]
    assert tokens["targets"][0]["legendFormat"] == "{{model}}"
    assert board["panels"][-1]["type"] == "alertlist"
    # No two panels overlap on Grafana's grid.
    cells = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in board["panels"]]
    assert len(cells) == len(set(cells))


def test_the_provisioning_files_name_the_stacks_prometheus_and_hold_no_password(raw_config):
    raw = {**two_models_monitored(raw_config), "monitoringPassword": "a-distinctive-password-4821"}
    stack = stack_of(raw)
    files = dashboard.files(stack, "dual-spark", "http://192.168.1.10:9090")
    source = yaml.safe_load(files[dashboard.DATASOURCE_FILE])["datasources"][0]
    assert (source["url"], source["basicAuthUser"], source["uid"]) == (
        "http://192.168.1.10:9090", "spark-llm", dashboard.DATASOURCE_UID
    )  # fmt: skip
    assert source["secureJsonData"]["basicAuthPassword"] == "$__env{SPARK_LLM_MONITORING_PASSWORD}"
    assert raw["monitoringPassword"] not in "".join(files.values())
    provider = yaml.safe_load(files[dashboard.PROVIDER_FILE])["providers"][0]
    assert provider["options"]["path"] == dashboard.CONTAINER_DASHBOARDS
    assert json.loads(files[dashboard.DASHBOARD_FILE]) == dashboard.dashboard(stack, "dual-spark")
