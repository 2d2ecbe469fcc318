"""Pure: the stack's monitoring, generated from what it deploys (issue 42) — not written by hand beside it.

- scrape: Prometheus's configuration: a target for every model's engine (its release's metrics), the router and
  each node's exporter, each labelled with the model, node and engine the stack knows;
- rules: the alert rules, each expression built from the metric catalogs (spark_llm.config.metric_catalog), so one
  rule reads vLLM's and SGLang's metrics alike, with a `for:` and a description naming the node, the model and the
  `spark-llm` command to run.

Not deployed yet: the Prometheus resource on the head that serves these (issue 42, item 1) comes next; until then
these are checked by unit tests only, and no config key turns them on.
"""

from spark_llm.plan.monitoring.rules import alert_rules
from spark_llm.plan.monitoring.scrape import MonitoringSettings, prometheus_config, targets

__all__ = ["MonitoringSettings", "alert_rules", "prometheus_config", "targets"]
