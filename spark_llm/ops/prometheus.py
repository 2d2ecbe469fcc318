"""The stack's Prometheus as the operator's commands read it (spark-llm:monitoring): its HTTP API on the head, from
this machine, with the basic auth the stack holds (spark-llm:monitoringPassword).

`spark-llm top` reads the panels' numbers, `spark-llm status` the firing alerts. Every failure is one sentence that
says what to do (Prometheus not running, the password refused, the head out of reach), never a traceback.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from spark_llm.config.monitoring import WEB_USER
from spark_llm.plan.monitoring.prometheus import prometheus_endpoint
from spark_llm.plan.stack import StackPlan

TIMEOUT_SECONDS = 10.0


class PrometheusError(Exception):
    """Prometheus did not answer, or refused: the message says what to do."""


@dataclass(frozen=True)
class Sample:
    labels: dict[str, str]
    value: float


@dataclass(frozen=True)
class Alert:
    name: str
    state: str
    """firing or pending."""
    labels: dict[str, str]
    summary: str
    description: str
    since: str

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "state": self.state,
            "labels": self.labels,
            "summary": self.summary,
            "description": self.description,
            "since": self.since,
        }


@dataclass(frozen=True)
class Prometheus:
    endpoint: str
    password: str
    timeout: float = TIMEOUT_SECONDS

    def _read(self, path: str, params: dict[str, str] | None = None) -> bytes:
        url = self.endpoint + path + ("?" + urllib.parse.urlencode(params) if params else "")
        request = urllib.request.Request(url)
        token = base64.b64encode(f"{WEB_USER}:{self.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as err:
            if err.code == 401:
                raise PrometheusError(
                    f"Prometheus at {self.endpoint} refused spark-llm:monitoringPassword (HTTP 401): the head has"
                    " another password's hash; `pulumi up` writes this one's"
                ) from None
            raise PrometheusError(f"Prometheus at {self.endpoint} answered HTTP {err.code} to {path}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise PrometheusError(
                f"Prometheus at {self.endpoint} did not answer ({reason}): `pulumi up` starts it;"
                " `spark-llm status` says whether the head is up"
            ) from None

    def _get(self, path: str, params: dict[str, str] | None = None) -> dict:
        try:
            answer = json.loads(self._read(path, params))
        except ValueError:
            raise PrometheusError(f"Prometheus at {self.endpoint} answered {path} with no JSON") from None
        if answer.get("status") != "success":
            raise PrometheusError(f"Prometheus could not answer {path}: {answer.get('error', answer)}")
        return answer["data"]

    def query(self, expr: str, at: float | None = None) -> list[Sample]:
        """An instant query (at `at`, Unix time; now when None): one Sample a series (NaN kept as NaN)."""
        params = {"query": expr, **({"time": repr(at)} if at is not None else {})}
        data = self._get("/api/v1/query", params)
        return [Sample(dict(s["metric"]), float(s["value"][1])) for s in data.get("result", [])]

    def alerts(self) -> list[Alert]:
        """Every alert pending or firing now, firing first."""
        found = [
            Alert(
                a["labels"].get("alertname", "?"),
                a.get("state", "?"),
                {k: v for k, v in a["labels"].items() if k != "alertname"},
                a.get("annotations", {}).get("summary", ""),
                a.get("annotations", {}).get("description", ""),
                a.get("activeAt", ""),
            )
            for a in self._get("/api/v1/alerts").get("alerts", [])
        ]
        return sorted(found, key=lambda a: (a.state != "firing", a.name, sorted(a.labels.items())))

    def targets(self) -> list[dict]:
        return list(self._get("/api/v1/targets").get("activeTargets", []))

    def rules(self) -> list[dict]:
        """The rule groups it loaded, each rule with its state and `duration` (its `for:` in seconds)."""
        return list(self._get("/api/v1/rules").get("groups", []))

    def own_metric(self, name: str) -> float | None:
        """One of Prometheus's own metrics, from its /metrics (the stack's config does not scrape Prometheus)."""
        for line in self._read("/metrics").decode().splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
        return None


def for_stack(stack: StackPlan) -> Prometheus | None:
    """The stack's Prometheus (None without spark-llm:monitoring)."""
    endpoint = prometheus_endpoint(stack.config)
    if endpoint is None:
        return None
    return Prometheus(endpoint, stack.config.monitoring_password or "")
