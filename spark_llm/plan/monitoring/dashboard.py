"""Pure: the Grafana dashboard generated from the stack (its JSON model), and the provisioning files a Grafana
container reads it with: the stack's Prometheus as the datasource, the dashboard's directory as a provider.

The panels are `spark-llm top`'s (panels.py): one time series a panel, a series per model or per node, then the
alerts firing. The datasource's password is not in any file: Grafana reads it from its environment when it loads
the provisioning file (`$__env{...}`), so the files can be shared and committed.
"""

from __future__ import annotations

import json

from spark_llm.config.monitoring import WEB_USER
from spark_llm.plan.monitoring.panels import Panel, panels
from spark_llm.plan.stack import StackPlan

DATASOURCE_UID = "spark-llm-prometheus"
PASSWORD_VARIABLE = "SPARK_LLM_MONITORING_PASSWORD"
DASHBOARD_FILE = "spark-llm.json"
DATASOURCE_FILE = "datasource.yaml"
PROVIDER_FILE = "dashboards.yaml"
# Where the provider reads dashboards in a Grafana container (the grafana/grafana image's conventions).
CONTAINER_DASHBOARDS = "/var/lib/grafana/dashboards"
WIDTH, HEIGHT = 12, 8  # a panel's size on Grafana's 24-column grid
SCHEMA_VERSION = 39


def _panel(index: int, panel: Panel) -> dict:
    return {
        "id": index + 1,
        "type": "timeseries",
        "title": panel.title,
        "datasource": {"type": "prometheus", "uid": DATASOURCE_UID},
        "gridPos": {"x": (index % 2) * WIDTH, "y": (index // 2) * HEIGHT, "w": WIDTH, "h": HEIGHT},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [{"refId": "A", "expr": panel.expr, "legendFormat": f"{{{{{panel.by}}}}}"}],
    }


def dashboard(stack: StackPlan, name: str) -> dict:
    """The dashboard of stack `name` (its uid and title carry the name)."""
    shown = panels(stack)
    items = [_panel(i, p) for i, p in enumerate(shown)]
    items.append(
        {
            "id": len(shown) + 1,
            "type": "alertlist",
            "title": "Alerts firing",
            "datasource": {"type": "prometheus", "uid": DATASOURCE_UID},
            "gridPos": {"x": 0, "y": ((len(shown) + 1) // 2) * HEIGHT, "w": 2 * WIDTH, "h": HEIGHT},
            "options": {"alertInstanceLabelFilter": "", "stateFilter": {"firing": True, "pending": True}},
        }
    )
    return {
        "uid": f"spark-llm-{name}"[:40],
        "title": f"spark-llm: {name}",
        "tags": ["spark-llm"],
        "timezone": "browser",
        "schemaVersion": SCHEMA_VERSION,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "panels": items,
    }


def datasource_file(endpoint: str, password: str = f"$__env{{{PASSWORD_VARIABLE}}}") -> str:
    """The datasource provisioning file: the stack's Prometheus with basic auth, its password from Grafana's
    environment (PASSWORD_VARIABLE; the stack's own Grafana: from a file, grafana.py)."""
    document = {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "spark-llm",
                "uid": DATASOURCE_UID,
                "type": "prometheus",
                "access": "proxy",
                "url": endpoint,
                "basicAuth": True,
                "basicAuthUser": WEB_USER,
                "secureJsonData": {"basicAuthPassword": password},
                "isDefault": True,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"  # JSON is YAML


def provider_file() -> str:
    document = {
        "apiVersion": 1,
        "providers": [{"name": "spark-llm", "type": "file", "options": {"path": CONTAINER_DASHBOARDS}}],
    }
    return json.dumps(document, indent=2) + "\n"


def files(stack: StackPlan, name: str, endpoint: str) -> dict[str, str]:
    """Every file, by name: the dashboard and both provisioning files."""
    return {
        DASHBOARD_FILE: json.dumps(dashboard(stack, name), indent=2) + "\n",
        DATASOURCE_FILE: datasource_file(endpoint),
        PROVIDER_FILE: provider_file(),
    }
