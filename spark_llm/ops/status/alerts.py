"""`spark-llm status`'s alerts line (spark-llm:monitoring): what the stack's Prometheus has firing now.

Read from this machine over Prometheus's API while the nodes are read (spark_llm.ops.prometheus). An alert is a
reading of the last minutes, not of this instant: it is said beside the verdict and never changes it (nor the exit
code), and a Prometheus that does not answer is one line saying so, not a failed status.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_llm.ops.prometheus import Alert, PrometheusError, for_stack
from spark_llm.plan.stack import StackPlan


@dataclass(frozen=True)
class AlertsStatus:
    alerts: tuple[Alert, ...]
    error: str = ""

    @property
    def firing(self) -> tuple[Alert, ...]:
        return tuple(a for a in self.alerts if a.state == "firing")

    def lines(self) -> list[str]:
        if self.error:
            return [f"alerts: unknown: {self.error}"]
        if not self.firing:
            pending = len(self.alerts)
            return [f"alerts: none firing{f' ({pending} pending)' if pending else ''}"]
        return [f"alerts: {len(self.firing)} firing"] + [
            f"  {alert.name}: {alert.description or alert.summary}" for alert in self.firing
        ]

    def to_json(self) -> dict:
        return {"alerts": [a.to_json() for a in self.alerts], **({"error": self.error} if self.error else {})}


def read_alerts(stack: StackPlan) -> AlertsStatus | None:
    """The stack's alerts (None without spark-llm:monitoring); one asked of a single model keeps that model's and
    the nodes' (an alert without a `model` label)."""
    prometheus = for_stack(stack)
    if prometheus is None:
        return None
    try:
        found = prometheus.alerts()
    except PrometheusError as err:
        return AlertsStatus((), str(err))
    models = set(stack.models)
    return AlertsStatus(tuple(a for a in found if a.labels.get("model", next(iter(models))) in models))
