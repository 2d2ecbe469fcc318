"""Prometheus's configuration from the stack: what to scrape, where, and the labels that say what it is.

Prometheus runs on the head with the host's network, as the router does: it reaches each engine's API where the
head itself reaches it (DeploymentPlan.api_address: loopback, or the one address the API listens on), the router's
metrics port on loopback, and each worker's exporter over the fabric. Every series carries the stack's own labels
(`model`, `node`, `engine_kind`, `release`), so a rule or a panel never depends on how an engine labels its
metrics. None of them is a label an engine sets itself (vLLM's `engine` is its engine index, SGLang's
`engine_type` its role), so Prometheus never renames one (`exported_*`).
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_llm.group.wedge import METRICS_PATH
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.monitoring.alertmanager import alerting
from spark_llm.plan.router import METRICS_PORT as ROUTER_METRICS_PORT
from spark_llm.plan.stack import StackPlan

ENGINE_JOB = "spark-llm-engine"
ROUTER_JOB = "spark-llm-router"
NODE_JOB = "spark-llm-node"
RULES_FILE = "spark-llm-rules.json"  # beside the config on the head; Prometheus reads JSON as the YAML it is


@dataclass(frozen=True)
class MonitoringSettings:
    """What the monitoring is tuned by (spark-llm:monitoring, once Prometheus is a stack resource)."""

    scrape_seconds: int = 15
    evaluation_seconds: int = 15
    node_exporter_port: int = 9100
    alertmanager: bool = False
    """Alertmanager runs on the head (spark_llm.plan.monitoring.alertmanager): Prometheus sends it the alerts."""


@dataclass(frozen=True)
class Target:
    job: str
    address: str
    """HOST:PORT as Prometheus on the head reaches it."""
    labels: tuple[tuple[str, str], ...]


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def engine_target(plan: DeploymentPlan) -> Target:
    """One model's engine: rank 0's API on the head, which serves /metrics (vLLM always; SGLang with its flag)."""
    head = plan.nodes[0]
    labels = (
        ("model", plan.model_name),
        ("node", head.name),
        ("engine_kind", plan.config.engine.kind),
        ("release", plan.config.engine.version),
    )
    return Target(ENGINE_JOB, _host_port(plan.api_address, plan.port), labels)


def targets(stack: StackPlan, settings: MonitoringSettings) -> list[Target]:
    """Every target of the stack: each model's engine, the router, each node's exporter (once per node)."""
    found = [engine_target(plan) for plan in stack.models.values()]
    if stack.router is not None:
        head = stack.nodes[0].name
        # smg serves its metrics apart from its API, on loopback (spark_llm.plan.router's --prometheus-port).
        found.append(Target(ROUTER_JOB, _host_port("127.0.0.1", ROUTER_METRICS_PORT), (("node", head),)))
    for node in stack.nodes:
        # The head's own exporter on loopback; a worker's over the fabric, as every head -> worker hop goes.
        host = "127.0.0.1" if node.role == "head" else node.fabric_address
        labels = (("node", node.name), ("role", node.role))
        found.append(Target(NODE_JOB, _host_port(host, settings.node_exporter_port), labels))
    return found


def prometheus_config(stack: StackPlan, settings: MonitoringSettings) -> dict:
    """prometheus.yml's content (as JSON, which is YAML): the global intervals, the rules file, a job per kind of
    target with one static group per target (its labels)."""
    jobs: dict[str, list[dict]] = {}
    for target in targets(stack, settings):
        jobs.setdefault(target.job, []).append({"targets": [target.address], "labels": dict(target.labels)})
    return {
        "global": {
            "scrape_interval": f"{settings.scrape_seconds}s",
            "evaluation_interval": f"{settings.evaluation_seconds}s",
        },
        "rule_files": [RULES_FILE],
        **alerting(settings.alertmanager),
        "scrape_configs": [
            {
                "job_name": job,
                "metrics_path": METRICS_PATH,
                # The head's exporter also serves the agent's textfile (spark_llm.group.agent_metrics), whose
                # `node` label names the node a reading is of: it wins over the target's (the exporter's own series
                # have none), where Prometheus would otherwise rename it `exported_node`.
                **({"honor_labels": True} if job == NODE_JOB else {}),
                "static_configs": groups,
            }
            for job, groups in jobs.items()
        ],
    }
