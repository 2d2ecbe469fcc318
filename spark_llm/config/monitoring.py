"""The `monitoring` section: Prometheus on the head and a node exporter on every node, generated from the stack
(docs/monitoring.md). Absent: nothing of it runs, and no engine's launch flags change."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from spark_llm.config.base import NAMESPACE, ConfigModel, Int, KeyedError, Port
from spark_llm.config.engine import Engine, ports_on_head
from spark_llm.config.router import EXAMPLE_IMAGE, METRICS_PORT, PinnedImage, Router

# Prometheus's own spelling of a size (`--storage.tsdb.retention.size`): a number and a unit of 1024s.
_SIZE = re.compile(r"^([1-9][0-9]*)(B|KB|MB|GB|TB)$")
_UNITS = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
# The user the basic auth of Prometheus's web config names; the password is spark-llm:monitoringPassword.
WEB_USER = "spark-llm"


def size_bytes(size: str) -> int:
    """`2GB` -> bytes, as Prometheus reads it (units of 1024)."""
    match = _SIZE.match(size)
    if match is None:
        raise ValueError(size)
    return int(match.group(1)) * _UNITS[match.group(2)]


def _size(v: str) -> str:
    if not _SIZE.match(v):
        raise ValueError(f"{v!r} is not a size Prometheus reads: a whole number and B, KB, MB, GB or TB, e.g. 2GB")
    return v


Size = Annotated[str, AfterValidator(_size)]


class Monitoring(ConfigModel):
    """Prometheus on the head, scraping every engine, the router and each node's exporter (docs/monitoring.md)."""

    image: PinnedImage = Field(
        description="Prometheus's image, pinned: REPO@sha256:DIGEST (prom/prometheus), or a local image's ID",
        json_schema_extra={"example": EXAMPLE_IMAGE.replace("spark-llm-router", "prometheus")},
    )
    node_exporter_image: PinnedImage = Field(
        alias="nodeExporterImage",
        description="The node exporter's image, pinned (prom/node-exporter), run once on every node",
        json_schema_extra={"example": EXAMPLE_IMAGE.replace("spark-llm-router", "node-exporter")},
    )
    alertmanager_image: PinnedImage | None = Field(
        None,
        alias="alertmanagerImage",
        description="Alertmanager's image, pinned (prom/alertmanager): it runs on the head with monitoringWebhook",
        json_schema_extra={"example": EXAMPLE_IMAGE.replace("spark-llm-router", "alertmanager")},
    )
    grafana_image: PinnedImage | None = Field(
        None,
        alias="grafanaImage",
        description="Grafana's image, pinned (grafana/grafana): it runs on the head with the stack's dashboard",
        json_schema_extra={"example": EXAMPLE_IMAGE.replace("spark-llm-router", "grafana")},
    )
    grafana_port: Port = Field(
        3000,
        alias="grafanaPort",
        description="Grafana's port on every address of the head, its login the stack's (monitoringPassword)",
        json_schema_extra={"example": 3000},
    )
    port: Port = Field(
        9090,
        description="Prometheus's port on every address of the head, behind basic auth (monitoringPassword)",
        json_schema_extra={"example": 9090},
    )
    node_exporter_port: Port = Field(
        9100,
        alias="nodeExporterPort",
        description="Each node's exporter: on the head's loopback, on a worker's fabric address",
        json_schema_extra={"example": 9100},
    )
    retention_size: Size = Field(
        "2GB",
        alias="retentionSize",
        description="The most disk Prometheus's data takes on the head (the oldest blocks go first)",
        json_schema_extra={"example": "2GB"},
    )
    scrape_seconds: Annotated[Int, Field(ge=1, le=300)] = Field(
        15,
        alias="scrapeSeconds",
        description="How often every target is scraped and every rule evaluated",
        json_schema_extra={"example": 15},
    )


def check_monitoring_ports(
    monitoring: Monitoring, engines: list[tuple[Engine, str]], router: Router | None
) -> KeyedError | None:
    """Prometheus's and the exporter's ports against each other and what else listens on the head: the engines
    there (each with its key), the router's port and its metrics port."""
    taken = [item for engine, key in engines for item in ports_on_head(engine, key)]
    if router is not None:
        taken += [(f"{NAMESPACE}:router.port", router.port), ("the router's metrics port", METRICS_PORT)]
    taken.append(("monitoring.port", monitoring.port))
    fields = [("port", monitoring.port), ("nodeExporterPort", monitoring.node_exporter_port)]
    if monitoring.grafana_image is not None:
        # Grafana's is checked first: against Prometheus's, the new key is the one to move.
        taken.append(("monitoring.grafanaPort", monitoring.grafana_port))
        fields.insert(0, ("grafanaPort", monitoring.grafana_port))
    used = {port for _, port in taken} | {monitoring.node_exporter_port}
    free = next(p for p in range(9090, 65536) if p not in used)
    for field, port in fields:
        for key, other in taken:
            if key == f"monitoring.{field}" or port != other:
                continue
            return KeyedError(f"{port} is also {key} on the head: {field} needs a port of its own", (field,), free)
    return None
