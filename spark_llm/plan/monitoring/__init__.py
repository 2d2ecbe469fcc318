"""Pure: the stack's monitoring, generated from what it deploys (issue 42) — not written by hand beside it.

- scrape: Prometheus's configuration: a target for every model's engine (its release's metrics), the router and
  each node's exporter, each labelled with the model, node and engine the stack knows;
- rules: the alert rules, each expression built from the metric catalogs (spark_llm.config.metric_catalog), so one
  rule reads vLLM's and SGLang's metrics alike, with a `for:` and a description naming the node, the model and the
  `spark-llm` command to run;
- panels: the numbers `spark-llm top` shows and the dashboard draws, one PromQL expression each; dashboard: the
  Grafana dashboard and its provisioning files, from those panels;
- prometheus: what spark-llm:monitoring runs (components.monitoring): Prometheus's container and files on the head,
  its reload without a restart, its basic auth; node_agents: the exporter and the GPU writer on every node;
  alertmanager: Alertmanager on the head, posting the alerts to the stack's webhook; grafana: Grafana on the head
  with the stack's dashboard (monitoring.grafanaImage).
"""

from spark_llm.plan.monitoring.rules import alert_rules
from spark_llm.plan.monitoring.scrape import MonitoringSettings, prometheus_config, targets

__all__ = ["MonitoringSettings", "alert_rules", "prometheus_config", "targets"]
