"""Pure: Prometheus on the head and a node exporter on every node (spark-llm:monitoring), as containers and files.

On the head, beside the launch scripts, under `monitoring/`:
- `config/` (mounted read-only): prometheus.yml and the rules file, both generated (scrape.py, rules.py). A model
  added, moved or renamed rewrites them, and the config step sends Prometheus a SIGHUP: it loads them again with no
  restart (its data, its scrapes and every engine untouched). The directory is mounted, not the files: each is
  rewritten by a rename (a new inode), which a mounted file would never show the running container.
- `web/` (mounted read-only): Prometheus's web config, basic auth for one user (config.monitoring.WEB_USER) with
  the bcrypt hash of spark-llm:monitoringPassword, hashed on the head (the password reaches it on stdin; no
  program here has bcrypt). Prometheus reads this file at every request: a new password needs no restart.
- `textfile/`: what the head's agent writes for the exporter's textfile collector (spark_llm.group.agent_metrics),
  beside the GPU writer's file (every node has this directory: node_agents.py).
Its data is a docker volume of its own (DATA_VOLUME): it outlives the container (a new image or port) and `pulumi
destroy`, and the size cap (retentionSize) keeps it from filling the head's disk.

On every node, once: the exporter and the GPU writer (node_agents.py). Both images are named by the stack (pinned);
the binaries are called by their path in the upstream images (prom/prometheus, prom/node-exporter), which the sim's
image (sim/monitoring) keeps too.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass

from spark_llm.config import StackConfig
from spark_llm.config.monitoring import WEB_USER, Monitoring, size_bytes
from spark_llm.plan.monitoring.alertmanager import AlertmanagerPlan
from spark_llm.plan.monitoring.dashboard import dashboard
from spark_llm.plan.monitoring.grafana import GrafanaPlan, grafana_plan
from spark_llm.plan.monitoring.node_agents import ExporterPlan, GpuWriterPlan, exporter, gpu_writer
from spark_llm.plan.monitoring.rules import alert_rules
from spark_llm.plan.monitoring.scrape import RULES_FILE, MonitoringSettings, prometheus_config
from spark_llm.plan.node_files import file_script
from spark_llm.plan.nodes import TEXTFILE_SUBDIR, monitoring_dir
from spark_llm.plan.stack import StackPlan

CONTAINER = "spark-llm-prometheus"
DATA_VOLUME = "spark-llm-prometheus-data"
PROMETHEUS_BIN = "/bin/prometheus"
CONFIG_NAME = "prometheus.yml"
WEB_NAME = "web.yml"
# In the containers.
CONTAINER_CONFIG_DIR = "/etc/spark-llm/prometheus"
CONTAINER_WEB_DIR = "/etc/spark-llm/prometheus-web"
CONTAINER_DATA = "/prometheus"
# Prometheus runs as nobody, as in its upstream image: the data volume is its, the config files only read.
USER = "65534:65534"
# How long `up` waits for Prometheus to answer, or to load a new config, before it says so and fails.
READY_SECONDS = 60
# Prometheus's log lines that end a wait (the same in 2.x and 3.x).
READY_LINE = "Server is ready to receive web requests."
LOADED_LINE = "Completed loading of configuration file"
FAILED_LINE = "Error reloading config"
LOG_OPTS = {"max-size": "20m", "max-file": "3"}


@dataclass(frozen=True)
class MonitoringPlan:
    """What spark-llm:monitoring runs: Prometheus and its files on the head, an exporter and a GPU writer per node."""

    image: str
    port: int
    retention_size: str
    directory: str
    """The head's `monitoring/` directory (its `config/`, `web/`, `textfile/`)."""
    config_text: str
    rules_text: str
    exporters: tuple[ExporterPlan, ...]
    gpu_writers: tuple[GpuWriterPlan, ...]
    alertmanager: AlertmanagerPlan | None
    """With monitoringWebhook: Alertmanager beside Prometheus on the head."""
    endpoint: str
    """Prometheus as this machine reaches it (basic auth)."""
    grafana: GrafanaPlan | None = None
    """With grafanaImage: Grafana on the head, the stack's dashboard provisioned."""
    container: str = CONTAINER
    config_key: str = "spark-llm:monitoring"

    @property
    def config_dir(self) -> str:
        return f"{self.directory}/config"

    @property
    def web_dir(self) -> str:
        return f"{self.directory}/web"

    @property
    def textfile_dir(self) -> str:
        return f"{self.directory}/{TEXTFILE_SUBDIR}"

    @property
    def config_digest(self) -> str:
        """What the config step writes: a new digest rewrites the files and reloads Prometheus (no restart)."""
        return hashlib.sha256((self.config_text + self.rules_text).encode()).hexdigest()[:16]

    @property
    def command(self) -> tuple[str, ...]:
        return (
            f"--config.file={CONTAINER_CONFIG_DIR}/{CONFIG_NAME}",
            f"--web.config.file={CONTAINER_WEB_DIR}/{WEB_NAME}",
            f"--storage.tsdb.path={CONTAINER_DATA}",
            f"--storage.tsdb.retention.size={self.retention_size}",
            f"--web.listen-address=0.0.0.0:{self.port}",
        )

    @property
    def mounts(self) -> tuple[tuple[str, str], ...]:
        return ((self.config_dir, CONTAINER_CONFIG_DIR), (self.web_dir, CONTAINER_WEB_DIR))

    @property
    def revision(self) -> str:
        """What replaces Prometheus's container: its image, flags (port, retention) and mounts; never the scrape
        config or the rules, which it reloads."""
        return _digest({"image": self.image, "command": self.command, "mounts": self.mounts})

    def config_script(self) -> str:
        """The head's config step: both files written (each by a rename), then, if Prometheus runs, a SIGHUP and a
        bounded wait for its log to say it loaded them (or why not)."""
        files = {CONFIG_NAME: self.config_text, RULES_FILE: self.rules_text}
        # Each by a rename, and checked where it landed (spark_llm.plan.node_files.file_script).
        writes = "".join(file_script(f"{self.config_dir}/{name}", text + "\n", "0644") for name, text in files.items())
        return (
            f"mkdir -p {shlex.quote(self.config_dir)} {shlex.quote(self.textfile_dir)}\n"
            f"since=$(date +%s)\n{writes}"
            f'if [ "$(docker inspect -f {{{{.State.Running}}}} {CONTAINER} 2>/dev/null)" != true ]; then\n'
            f"  echo 'monitoring: config written ({self.config_digest}); Prometheus starts with it'\n"
            "  exit 0\n"
            "fi\n"
            f"docker kill --signal HUP {CONTAINER} >/dev/null\n"
            f"{_log_wait(LOADED_LINE, 'Prometheus to load the new scrape config and rules')}"
            f"echo 'monitoring: Prometheus reloaded its config ({self.config_digest}), not restarted'\n"
        )

    def web_script(self, password: str) -> str:
        """The head's web-config step (a secret: it carries the password): the bcrypt hash made on the head."""
        hashing = (
            "import crypt, sys\n"
            "print(crypt.crypt(sys.stdin.read(), crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10)))\n"
        )
        path, new = f"{self.web_dir}/{WEB_NAME}", f"{self.web_dir}/.{WEB_NAME}.new"
        return (
            f"mkdir -p {shlex.quote(self.web_dir)}\n"
            f"hash=$(printf '%s' {shlex.quote(password)} | python3 -W ignore -c {shlex.quote(hashing)})\n"
            'case "$hash" in \\$2*) ;; *) echo "monitoring: the head could not make a bcrypt hash" >&2; exit 1;; esac\n'
            f'printf \'basic_auth_users:\\n  {WEB_USER}: "%s"\\n\' "$hash" > {shlex.quote(new)}\n'
            f"chmod 0644 {shlex.quote(new)}\n"
            f"mv -f {shlex.quote(new)} {shlex.quote(path)}\n"
            f"echo 'monitoring: basic auth for {WEB_USER} written (its bcrypt hash only)'\n"
        )

    def ready_script(self) -> str:
        """After a new container: a bounded wait for Prometheus to say it serves (or the lines that say why not)."""
        return (
            "since=$(docker inspect -f '{{.State.StartedAt}}' " + CONTAINER + ")\n"
            f"{_log_wait(READY_LINE, 'Prometheus to serve')}"
            f"echo 'monitoring: Prometheus serves on port {self.port} (basic auth, user {WEB_USER})'\n"
        )


def _log_wait(line: str, what: str) -> str:
    """Bash: wait (bounded) until Prometheus's log since $since has `line`; its config error or its last lines
    otherwise, and a failure."""
    return (
        f"for _ in $(seq {READY_SECONDS * 2}); do\n"
        f'  log=$(docker logs --since "$since" {CONTAINER} 2>&1 || true)\n'
        f'  if grep -q {shlex.quote(FAILED_LINE)} <<<"$log"; then\n'
        f'    grep {shlex.quote(FAILED_LINE)} <<<"$log" | tail -n 3 >&2\n'
        "    echo 'monitoring: Prometheus refused the new config (above); it keeps the one it had' >&2\n"
        "    exit 1\n"
        "  fi\n"
        f'  grep -q {shlex.quote(line)} <<<"$log" && break\n'
        f'  if [ "$(docker inspect -f {{{{.State.Running}}}} {CONTAINER} 2>/dev/null)" != true ]; then\n'
        f"    docker logs --tail 20 {CONTAINER} >&2 || true\n"
        f"    echo 'monitoring: Prometheus stopped (its last lines above)' >&2\n"
        "    exit 1\n"
        "  fi\n"
        "  sleep 0.5\n"
        "done\n"
        f'grep -q {shlex.quote(line)} <<<"$log" || {{ docker logs --tail 20 {CONTAINER} >&2;'
        f" echo 'monitoring: gave up after {READY_SECONDS} s waiting for {what}' >&2; exit 1; }}\n"
    )


def _digest(material: dict) -> str:
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]


def settings_of(monitoring: Monitoring) -> MonitoringSettings:
    return MonitoringSettings(
        scrape_seconds=monitoring.scrape_seconds,
        evaluation_seconds=monitoring.scrape_seconds,
        node_exporter_port=monitoring.node_exporter_port,
        alertmanager=monitoring.alertmanager_image is not None,
    )


def monitoring_plan(stack: StackPlan, ask: str = "", name: str = "stack") -> MonitoringPlan | None:
    """spark-llm:monitoring's containers and files for this stack; None when the section is absent."""
    monitoring = stack.config.monitoring
    if monitoring is None:
        return None
    head = stack.config.head
    directory = monitoring_dir(head.user)
    settings = settings_of(monitoring)
    textfile = f"{directory}/{TEXTFILE_SUBDIR}"
    return MonitoringPlan(
        image=monitoring.image,
        port=monitoring.port,
        retention_size=monitoring.retention_size,
        directory=directory,
        config_text=json.dumps(prometheus_config(stack, settings), indent=1, sort_keys=True),
        rules_text=json.dumps(alert_rules(stack, ask, monitoring.scrape_seconds), indent=1, sort_keys=True),
        exporters=tuple(exporter(node, monitoring, textfile) for node in stack.nodes),
        gpu_writers=tuple(
            gpu_writer(node, monitoring, textfile, gpus(stack, node.name), weights_paths(stack, node.name))
            for node in stack.nodes
        ),
        alertmanager=(
            AlertmanagerPlan(monitoring.alertmanager_image, f"{directory}/alertmanager")
            if monitoring.alertmanager_image is not None
            else None
        ),
        endpoint=prometheus_endpoint(stack.config) or "",
        grafana=(
            grafana_plan(
                monitoring.grafana_image,
                monitoring.grafana_port,
                f"{directory}/grafana",
                dashboard(stack, name),
                monitoring.port,
            )
            if monitoring.grafana_image is not None
            else None
        ),
    )


def gpus(stack: StackPlan, node: str) -> bool:
    """Whether the node's engines are given GPUs (spark-llm:engine.gpus of a model on it): its GPU writer is too."""
    return any(plan.config.engine.gpus for plan in stack.models.values() if node in plan.config.deployment.nodes)


def weights_paths(stack: StackPlan, node: str) -> tuple[str, ...]:
    """The weights paths of the models on the node (spark-llm:model.path), each once: its writer reads their disks."""
    paths = (plan.model_path for plan in stack.models.values() if node in plan.config.deployment.nodes)
    return tuple(dict.fromkeys(paths))


def prometheus_endpoint(cfg: StackConfig) -> str | None:
    """Prometheus at the head's address as this machine reaches it; None without spark-llm:monitoring."""
    if cfg.monitoring is None:
        return None
    host = f"[{cfg.head.host}]" if ":" in cfg.head.host else cfg.head.host
    return f"http://{host}:{cfg.monitoring.port}"


# The head's probe section (preview and up read it before anything runs): the size of the file system that holds
# Docker's data root, where Prometheus's volume lives.
DISK_SECTION = "monitoring_disk"


def disk_probe() -> str:
    """Read-only bash on the head: `monitoring_disk<TAB>BYTES ROOT` (nothing when Docker or df cannot say)."""
    return (
        "if root=$(docker info -f '{{.DockerRootDir}}' 2>/dev/null) &&"
        ' size=$(df -B1 --output=size "$root" 2>/dev/null | tail -n 1 | tr -d " ") && [ -n "$size" ]; then\n'
        f'  printf "{DISK_SECTION}\\t%s %s\\n" "$size" "$root"\n'
        "fi\n"
    )


def retention_refusal(monitoring: Monitoring, facts: dict[str, str]) -> str | None:
    """Why retentionSize cannot be (more than the disk under Docker's data root on the head), or None."""
    found = facts.get(DISK_SECTION, "").split(" ", 1)
    if len(found) != 2 or not found[0].isdigit():
        return None
    size, root = int(found[0]), found[1]
    if size_bytes(monitoring.retention_size) <= size:
        return None
    tenth = max(size // 10 >> 30, 1)
    return (
        f"spark-llm:monitoring.retentionSize: {monitoring.retention_size} is more than the head's whole disk under"
        f" Docker's data root ({root}: {size >> 30} GB), where Prometheus keeps its data: it would fill the disk"
        f" the weights and images need (e.g. {tenth}GB)."
    )
