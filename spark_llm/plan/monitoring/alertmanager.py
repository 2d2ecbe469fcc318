"""Pure: Alertmanager on the head (spark-llm:monitoring.alertmanagerImage with spark-llm:monitoringWebhook): it posts
the alerts Prometheus fires to the stack's webhook, grouped by alert, model and node, and again when they resolve.

Its config holds the webhook URL (a secret: such URLs carry their token), so it is written by a secret step, 0600,
and Alertmanager runs as root in its container to read it (it has no other mount than its config's directory). It
listens on the head's loopback only: Prometheus beside it is its one client. A new URL rewrites the config, and the
step sends it a SIGHUP and waits for its log to say it loaded it: no restart.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from spark_llm.plan.node_files import file_script

CONTAINER = "spark-llm-alertmanager"
BIN = "/bin/alertmanager"
PORT = 9093
ADDRESS = f"127.0.0.1:{PORT}"
CONFIG_NAME = "alertmanager.yml"
CONTAINER_CONFIG_DIR = "/etc/spark-llm/alertmanager"
LOADED_LINE = "Completed loading of configuration file"
READY_SECONDS = 60
# A group's first post 10 s after its first alert fires (Alertmanager's default 30 s is a long wait when a wedge or a
# full disk is the news), the same group's changes a minute apart, a firing alert again every 4 hours.
ROUTE = {
    "group_by": ["alertname", "model", "node"],
    "group_wait": "10s",
    "group_interval": "1m",
    "repeat_interval": "4h",
}


@dataclass(frozen=True)
class AlertmanagerPlan:
    image: str
    directory: str
    """Its config's directory on the head (mounted read-only)."""

    @property
    def command(self) -> tuple[str, ...]:
        return (
            BIN,
            f"--config.file={CONTAINER_CONFIG_DIR}/{CONFIG_NAME}",
            "--storage.path=/tmp/alertmanager",
            f"--web.listen-address={ADDRESS}",
            # One Alertmanager: no gossip port open.
            "--cluster.listen-address=",
        )

    @staticmethod
    def config_text(webhook: str) -> str:
        document = {
            "route": {"receiver": "webhook", **ROUTE},
            "receivers": [{"name": "webhook", "webhook_configs": [{"url": webhook, "send_resolved": True}]}],
        }
        return json.dumps(document, indent=1) + "\n"  # JSON is YAML

    def config_script(self, webhook: str) -> str:
        """The head's step (a secret: the URL): the config written 0600, then a SIGHUP to a running Alertmanager and
        a bounded wait for its log to say it loaded it."""
        wait = (
            f"for _ in $(seq {READY_SECONDS * 2}); do\n"
            f'  docker logs --since "$since" {CONTAINER} 2>&1 | grep -q {shlex.quote(LOADED_LINE)} && break\n'
            "  sleep 0.5\n"
            "done\n"
            f'docker logs --since "$since" {CONTAINER} 2>&1 | grep -q {shlex.quote(LOADED_LINE)} ||'
            f" {{ docker logs --tail 20 {CONTAINER} >&2; echo 'monitoring: Alertmanager did not load its new"
            " config (its last lines above)' >&2; exit 1; }\n"
        )
        return (
            "since=$(date +%s)\n"
            + file_script(f"{self.directory}/{CONFIG_NAME}", self.config_text(webhook), "0600")
            + f'if [ "$(docker inspect -f {{{{.State.Running}}}} {CONTAINER} 2>/dev/null)" = true ]; then\n'
            f"  docker kill --signal HUP {CONTAINER} >/dev/null\n"
            + "".join(f"  {line}\n" for line in wait.splitlines())
            + "fi\n"
            "echo 'monitoring: Alertmanager posts the alerts to the webhook'\n"
        )


def alerting(enabled: bool) -> dict:
    """prometheus.yml's `alerting` section: the head's Alertmanager, or none."""
    return {"alerting": {"alertmanagers": [{"static_configs": [{"targets": [ADDRESS]}]}]}} if enabled else {}
