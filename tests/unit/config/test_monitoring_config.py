"""spark-llm:monitoring: both images pinned, ports of their own on the head, a retention size Prometheus reads, and
spark-llm:monitoringPassword required (a secret); each mistake one line naming the key and a valid value. Absent
(or Pulumi.yaml's default `{}`): none of it."""

from __future__ import annotations

from typing import Any

import pytest

from spark_llm.config import ConfigError, parse
from spark_llm.config.monitoring import size_bytes
from tests.conftest import dual_spark_raw

DIGEST = "sha256:" + "ab" * 32
IMAGES = {"image": f"prom/prometheus@{DIGEST}", "nodeExporterImage": f"prom/node-exporter@{DIGEST}"}


def with_monitoring(password: str | None = "pw", **section: Any) -> dict[str, Any]:
    raw = dual_spark_raw()
    raw["monitoring"] = {**IMAGES, **section}
    if password is not None:
        raw["monitoringPassword"] = password
    return raw


def refusal(raw: dict[str, Any], secret_keys: set[str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        parse(raw, secret_keys)
    assert "Traceback" not in str(refused.value)
    return str(refused.value).splitlines()


def test_absent_or_the_default_is_off() -> None:
    assert parse(dual_spark_raw()).monitoring is None
    assert parse({**dual_spark_raw(), "monitoring": {}}).monitoring is None


def test_the_defaults() -> None:
    monitoring = parse(with_monitoring()).monitoring
    assert monitoring is not None
    assert (monitoring.port, monitoring.node_exporter_port, monitoring.retention_size) == (9090, 9100, "2GB")
    assert monitoring.scrape_seconds == 15
    assert (monitoring.grafana_image, monitoring.grafana_port) == (None, 3000)  # no Grafana unless its image is set


def test_the_password_is_required_and_must_be_a_secret() -> None:
    (line,) = refusal(with_monitoring(password=None))[1:]
    assert line.startswith("  spark-llm:monitoringPassword: Prometheus's port asks for a password")
    assert "pulumi config set --secret monitoringPassword" in line
    (line,) = refusal(with_monitoring(), secret_keys=set())
    assert "spark-llm:monitoringPassword is given in plain text; it must be a secret" in line


@pytest.mark.parametrize(
    ("section", "key", "taken_by"),
    [
        ({"port": 30000}, "port", "spark-llm:engine.port"),
        ({"port": 20000}, "port", "spark-llm:engine.distPort"),
        ({"nodeExporterPort": 30000}, "nodeExporterPort", "spark-llm:engine.port"),
        ({"nodeExporterPort": 9090}, "nodeExporterPort", "monitoring.port"),
        ({"grafanaImage": DIGEST, "grafanaPort": 9090}, "grafanaPort", "monitoring.port"),
        ({"grafanaImage": DIGEST, "grafanaPort": 30000}, "grafanaPort", "spark-llm:engine.port"),
    ],
)
def test_a_port_taken_on_the_head_is_refused_naming_both_keys(section: dict, key: str, taken_by: str) -> None:
    (line,) = refusal(with_monitoring(**section))[1:]
    assert line.startswith(f"  spark-llm:monitoring.{key}: ")
    assert f"is also {taken_by} on the head" in line and "(e.g. 909" in line


def test_the_routers_ports_are_taken_too() -> None:
    raw = with_monitoring(port=4000)
    raw["router"], raw["apiKey"] = {"image": DIGEST}, "sk"
    (line,) = refusal(raw)[1:]
    assert "is also spark-llm:router.port on the head" in line
    raw["monitoring"] = {**IMAGES, "port": 29000}
    (line,) = refusal(raw)[1:]
    assert "is also the router's metrics port on the head" in line


@pytest.mark.parametrize("size", ["2G", "1.5GB", "0GB", "2 GB", "2gib", ""])
def test_a_retention_size_prometheus_cannot_read_is_refused_with_an_example(size: str) -> None:
    lines = refusal(with_monitoring(retentionSize=size))
    assert any(line.startswith("  spark-llm:monitoring.retentionSize: ") and "2GB" in line for line in lines), lines


def test_sizes_are_read_as_prometheus_reads_them() -> None:
    assert size_bytes("2GB") == 2 << 30 and size_bytes("500MB") == 500 << 20


def test_an_image_not_pinned_is_refused() -> None:
    (line,) = refusal(with_monitoring(nodeExporterImage="prom/node-exporter:v1.8.2"))[1:]
    assert line.startswith("  spark-llm:monitoring.nodeExporterImage: 'prom/node-exporter:v1.8.2' is not pinned")


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        ({"monitoringWebhook": "https://hooks.example.com/x"}, "monitoring.alertmanagerImage", "name its image"),
        (
            {"image": f"prom/alertmanager@{DIGEST}"},
            "monitoringWebhook",
            "`pulumi config set --secret monitoringWebhook",
        ),
        (
            {"image": f"prom/alertmanager@{DIGEST}", "monitoringWebhook": "hooks.example.com/x"},
            "monitoringWebhook",
            "starts with http:// or https://",
        ),
    ],
    ids=["webhook-without-image", "image-without-webhook", "webhook-not-a-url"],
)
def test_alertmanager_needs_both_its_image_and_the_webhook(change: dict, key: str, words: str) -> None:
    raw = with_monitoring()
    if "image" in change:
        raw["monitoring"]["alertmanagerImage"] = change["image"]
    if "monitoringWebhook" in change:
        raw["monitoringWebhook"] = change["monitoringWebhook"]
    (line,) = refusal(raw)[1:]
    assert line.startswith(f"  spark-llm:{key}: ") and words in line, line


def test_a_webhook_without_monitoring_is_refused() -> None:
    raw = dual_spark_raw()
    raw["monitoringWebhook"] = "https://hooks.example.com/x"
    (line,) = refusal(raw)[1:]
    assert line.startswith("  spark-llm:monitoringWebhook: alerts come from spark-llm:monitoring's Prometheus")
