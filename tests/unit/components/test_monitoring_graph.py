"""spark-llm:monitoring under Pulumi mocks (Pulumi.dual-spark.yaml with the section): Prometheus a container on the
head's docker provider beside the engine groups (nothing of theirs waits for it, it waits for none of them), its
scrape config a step apart from the container (a change reloads it), the password only in a secret step, the data
in a volume kept on delete, and an exporter on every node's own provider."""

from __future__ import annotations

import base64
import json

import pytest

from tests.unit.components.test_router_graph import every_request  # noqa: F401 (a fixture)
from tests.unit.graph_mocks import dual_spark_stack_file, inputs, label, pinned, register, without_secrets

DIGEST = "sha256:" + "cd" * 32
PASSWORD = "monitoring-graph-password"


def _monitored(raw: dict) -> dict:
    raw["monitoringPassword"] = PASSWORD
    raw["monitoring"] = {
        "image": f"prom/prometheus@{DIGEST}",
        "nodeExporterImage": f"prom/node-exporter@{DIGEST}",
    }
    return raw


@pytest.fixture
def monitored(monkeypatch, every_request):  # noqa: F811
    return register(monkeypatch, _monitored(pinned(dual_spark_stack_file())), secrets=("monitoringPassword",))


def test_prometheus_is_a_container_on_the_head_beside_the_groups(monitored, every_request):  # noqa: F811
    container = monitored["monitoring"]
    assert container.type == "docker:index/container:Container"
    assert "::spark-docker-spark-1::" in container.provider
    got = inputs(container)
    assert (got["name"], got["networkMode"], got["restart"]) == ("spark-llm-prometheus", "host", "unless-stopped")
    assert got["entrypoints"] == ["/bin/prometheus"] and got["user"] == "65534:65534"
    assert "--storage.tsdb.retention.size=2GB" in got["command"]
    assert "--web.listen-address=0.0.0.0:9090" in got["command"]
    assert {v.get("volumeName") for v in got["volumes"]} >= {"spark-llm-prometheus-data"}
    assert container.deleteBeforeReplace and label(container, "spark-llm.monitoring.revision")
    component = next(r for r in every_request if r.type == "spark-llm:components:Monitoring")
    assert not [dep for dep in component.dependencies if "spark-engine" in dep], component.dependencies
    engine_side = [r for r in every_request if "SparkCluster" in r.parent or r.type.endswith("SparkCluster")]
    assert not [r for r in engine_side if any("monitoring" in dep for dep in r.dependencies)]


def test_the_config_is_its_own_step_and_the_data_volume_is_kept_on_delete(monitored):
    config = inputs(monitored["monitoring-config"])
    # The scrape config rides in the step (its digest a trigger), not in the container: a change reloads it.
    assert '"job_name": "spark-llm-engine"' in config["stdin"] and "docker kill --signal HUP" in config["stdin"]
    assert "spark-llm-engine" not in json.dumps(inputs(monitored["monitoring"]))
    assert monitored["monitoring-data"].retainOnDelete
    assert inputs(monitored["monitoring-data"])["name"] == "spark-llm-prometheus-data"


def test_the_password_reaches_the_head_in_a_secret_step_only(monitored):
    assert PASSWORD in json.dumps(inputs(monitored["monitoring-web"]))
    for name, request in monitored.items():
        assert PASSWORD not in json.dumps(without_secrets(inputs(request))), name


def test_an_exporter_runs_on_every_node_on_its_own_provider(monitored):
    for node, listen in (("spark-1", "127.0.0.1:9100"), ("spark-2", None)):
        exporter = monitored[f"monitoring-exporter-{node}"]
        assert f"::spark-docker-{node}::" in exporter.provider
        got = inputs(exporter)
        assert (got["name"], got["pidMode"], got["networkMode"]) == ("spark-llm-node-exporter", "host", "host")
        assert got["entrypoints"][0] == "/bin/node_exporter" and got["mounts"][0]["bindOptions"] == {
            "propagation": "rslave"
        }
        flags = dict(flag.split("=", 1) for flag in got["entrypoints"][1:])
        # The head's on loopback (Prometheus is there); a worker's on its fabric address, off the operator's side.
        assert flags["--web.listen-address"] == listen if listen else flags["--web.listen-address"].endswith(":9100")
        assert node == "spark-1" or not flags["--web.listen-address"].startswith(("0.0.0.0", "127."))
    # Each node's textfile directory (the GPU writer's file; on the head the agent's too).
    textfile = "--collector.textfile.directory=/run/spark-llm/textfile"
    assert all(textfile in inputs(monitored[f"monitoring-exporter-{n}"])["entrypoints"] for n in ("spark-1", "spark-2"))


def test_a_gpu_writer_runs_on_every_node_with_its_gpus(monitored, every_request):  # noqa: F811
    for node in ("spark-1", "spark-2"):
        writer = monitored[f"monitoring-gpu-{node}"]
        assert f"::spark-docker-{node}::" in writer.provider
        got = inputs(writer)
        assert (got["name"], got["gpus"], got["networkMode"]) == ("spark-llm-gpu-readings", "all", "none")
        assert got["entrypoints"][:2] == ["/bin/sh", "-c"] and "nvidia-smi" in got["entrypoints"][2]
        assert got["entrypoints"][4:6] == ["/host", "/run/spark-llm/textfile"]
    # A worker's textfile directory is made before its writer and exporter mount it (docker's --mount makes none).
    made = inputs(monitored["monitoring-dir-spark-2"])["stdin"]
    assert "mkdir -p /home/aurora/spark-llm/monitoring/textfile" in made
    for name in ("monitoring-gpu-spark-2", "monitoring-exporter-spark-2"):
        request = next(r for r in every_request if r.name == name)
        assert any(d.endswith("::monitoring-dir-spark-2") for d in request.dependencies), name


def test_with_a_webhook_alertmanager_runs_on_the_heads_loopback_and_the_url_is_only_in_a_secret_step(monkeypatch):
    raw = _monitored(pinned(dual_spark_stack_file()))
    raw["monitoring"]["alertmanagerImage"] = f"prom/alertmanager@{DIGEST}"
    raw["monitoringWebhook"] = "https://hooks.example.com/T0KEN-in-the-url"
    made = register(monkeypatch, raw, secrets=("monitoringPassword", "monitoringWebhook"))
    got = inputs(made["monitoring-alertmanager"])
    assert "::spark-docker-spark-1::" in made["monitoring-alertmanager"].provider
    assert "--web.listen-address=127.0.0.1:9093" in got["entrypoints"] and got["networkMode"] == "host"
    for name, request in made.items():
        assert "T0KEN-in-the-url" not in json.dumps(without_secrets(inputs(request))), name
    assert "T0KEN-in-the-url" in json.dumps(inputs(made["monitoring-alertmanager-config"]))
    # Prometheus sends it the alerts.
    assert '"127.0.0.1:9093"' in inputs(made["monitoring-config"])["stdin"]


def test_with_grafana_it_runs_on_the_head_with_the_stacks_dashboard_and_the_password_only_in_a_file(monkeypatch):
    """spark-llm:monitoring.grafanaImage: Grafana on the head after Prometheus, its login and its datasource's
    password the stack's, read from a 0600 file a secret step writes: in no environment, file or other input."""
    raw = _monitored(pinned(dual_spark_stack_file()))
    raw["monitoring"]["grafanaImage"] = f"grafana/grafana@{DIGEST}"
    made = register(monkeypatch, raw, secrets=("monitoringPassword",))
    container = made["monitoring-grafana"]
    got = inputs(container)
    assert "::spark-docker-spark-1::" in container.provider and got["networkMode"] == "host"
    assert (got["name"], got["user"], got["restart"]) == ("spark-llm-grafana", "0:0", "unless-stopped")
    env = dict(item.split("=", 1) for item in got["envs"])
    assert env["GF_SERVER_HTTP_PORT"] == "3000" and env["GF_SECURITY_ADMIN_USER"] == "spark-llm"
    assert env["GF_SECURITY_ADMIN_PASSWORD__FILE"] == "/run/spark-llm/grafana/password"
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false" and env["GF_ANALYTICS_REPORTING_ENABLED"] == "false"
    mounts = {v.get("containerPath"): v for v in got["volumes"]}
    assert all(mounts[p]["readOnly"] for p in ("/etc/grafana/provisioning", "/run/spark-llm/grafana"))
    assert mounts["/var/lib/grafana"]["volumeName"] == "spark-llm-grafana-data"
    assert made["monitoring-grafana-data"].retainOnDelete
    assert any(dep.endswith("::monitoring") for dep in container.dependencies), container.dependencies
    files = inputs(made["monitoring-grafana-files"])["stdin"]
    assert '"url": "http://127.0.0.1:9090"' in files and "$__file{/run/spark-llm/grafana/password}" in files
    assert '"title": "spark-llm: dual-spark"' in files  # the stack's dashboard, named after the stack
    # The password's file (no newline: it travels base64-encoded) in the secret step only.
    assert base64.b64encode(PASSWORD.encode()).decode() in json.dumps(inputs(made["monitoring-grafana-secret"]))
    for name, request in made.items():
        assert PASSWORD not in json.dumps(without_secrets(inputs(request))), name
