"""Pure: the router on the head (spark-llm:router), from the stack config and the engines it fronts.

The router is smg (the Shepherd Model Gateway) in the image sim/router/build-image.sh makes: its launcher
(sim/router/launch.py) reads the API key from a mounted file, registers every engine of the workers file with smg
and keeps them registered (smg keeps its registrations in memory only: a restarted router registers again by
itself), and answers `--wait-ready` with whether smg lists each model under its own name, healthy.

With a router the engines' API is not for clients any more: `engine_behind_router` binds it to the head's fabric
address (unless the user chose spark-llm:engine.host), which the router on the head reaches and the operator's
side does not. A new image, port or key replaces the router's container only (nothing of it is in the engine
group's revision); the models it serves (the workers file) change without replacing it: the launcher reads the file
again and changes smg's registrations live.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from spark_llm.config import NAMESPACE, StackConfig
from spark_llm.config.group import GroupConfig
from spark_llm.config.router import METRICS_PORT
from spark_llm.group.records import RouterSpec
from spark_llm.group.router import LABEL_RESTORED
from spark_llm.plan.nodes import remote_dir

CONTAINER = "spark-llm-router"
# The router's files on the head, beside the launch script; read-only in its container. The workers file sits in a
# directory of its own, and the directory is what the container mounts: the file is rewritten by a rename (a new
# inode, spark_llm.plan.node_files.file_script), and a bind mount of the file itself would keep showing the old
# inode to the running router. A mounted directory shows the new file at once, so the launcher follows each model
# added, removed or renamed with no new container; and the file alone is the router's list of models, whoever
# (a `pulumi up`, the supervisor's copy, docker after a reboot) starts the container.
WORKERS_DIR_NAME = "router-workers"
WORKERS_NAME = "workers.json"
KEY_NAME = "router-api-key"
CONTAINER_WORKERS_DIR = "/run/spark-llm/router-workers"
CONTAINER_WORKERS = f"{CONTAINER_WORKERS_DIR}/{WORKERS_NAME}"
CONTAINER_KEY = "/run/secrets/router-api-key"
# The router's log, bounded (issue 41, 7: it grew without end, a line a health check a second): Docker's json-file
# driver keeps at most 3 files of 20 MB, the newest lines.
LOG_DRIVER = "json-file"
LOG_OPTS = {"max-size": "20m", "max-file": "3"}
# The variables the launcher reads (sim/router/launch.py).
KEY_FILE_VARIABLE = "SPARK_LLM_ROUTER_API_KEY_FILE"
WORKERS_FILE_VARIABLE = "SPARK_LLM_ROUTER_WORKERS_FILE"
# How smg notices an engine that went away and came back (its group restarted). Its defaults (a health check every
# 60 s, a circuit breaker that opens after 10 failed requests and stays open 60 s) kept a restarted engine out for
# 55 to 59 s after it answered again (bench/router_restart_bench.py: a stand-in stopped and started under requests).
# A check every second, unhealthy after 2 missed and healthy after 1 answered, serves it again within a second of
# its answer (0.5 to 0.6 s), and a request meanwhile gets smg's 503 `no_available_workers` within 2 s of the engine
# going, where a request for a model the stack does not serve gets 404 `model_not_found`. No circuit breaker: each
# model has one engine, so there is nothing to fail over to, and the health check already keeps a dead one out.
HEALTH_FLAGS = (
    "--health-check-interval-secs",
    "1",
    "--health-failure-threshold",
    "2",
    "--health-success-threshold",
    "1",
    "--disable-circuit-breaker",
)
# How smg retries a request its engine did not take. An engine stopped for a rollout or a restart refuses
# connections a moment before the health check above marks it down (up to 2 s), and with smg's own retries (5, from
# 50 ms: 0.4 s measured) a request in that moment got a 500 `call_upstream_connection_failed` whose message is the
# engine's URL, its fabric address and port (issue 41, 7: 3 answers to a client asking every 100 ms, each stop).
# Retried for 2.8 to 4.2 s (100 ms doubling to 1 s, 6 times, jitter 20 %), such a request outlasts the health check
# and ends in smg's 503 `no_available_workers`, which names no address (bench/router_restart_bench.py, both settings
# side by side). The price: a request failing for another reason smg retries fails up to 4 s later.
RETRY_FLAGS = (
    "--retry-max-retries",
    "6",
    "--retry-initial-backoff-ms",
    "100",
    "--retry-backoff-multiplier",
    "2",
    "--retry-max-backoff-ms",
    "1000",
)
# How long `pulumi up` waits for the router to list every model (the engines already served: seconds, normally).
READY_SECONDS = 120
# How long the router must be gone or stopped before the supervisor brings it back (`pulumi up` replaces it within
# seconds, and must not find one the supervisor made in its place: spark_llm.group.router).
SUPERVISOR_GRACE_SECONDS = 30
# The label whose value is `RouterPlan.revision` (a new value replaces the container).
LABEL_REVISION = "spark-llm.router.revision"
LABEL_API_KEY = "spark-llm.router.api-key"
# The state whose `pulumi up` made the container (components.state_identity): a router of another state (another
# checkout's, a lost state's) holds the name this state's needs, and goes before this state makes its own.
LABEL_OWNER = "spark-llm.router.owner"


@dataclass(frozen=True)
class RouterPlan:
    """What the head runs as the router, and where the operator's side reaches it."""

    image: str
    """spark-llm:router.image: pinned by digest (REPO@sha256:...) or a local image's ID (sha256:...)."""
    port: int
    container: str
    workers: tuple[tuple[str, str], ...]
    """Each model the router serves: (its name in the API, the engine's URL as the head reaches it)."""
    workers_path: str
    """The workers file on the head (JSON, `workers_file`), alone in its directory (`workers_dir`, mounted)."""
    key_path: str
    """The API key file on the head (0400): the stack's apiKey, a secret."""
    endpoint: str
    """The stack's endpoint: the router at the head's address, as this machine reaches it."""
    config_key: str = f"{NAMESPACE}:router"

    @property
    def workers_file(self) -> str:
        """The workers file's content: `[{"model": NAME, "url": URL}, ...]`, one line and a newline."""
        return json.dumps([{"model": m, "url": u} for m, u in self.workers]) + "\n"

    @property
    def workers_dir(self) -> str:
        """The directory the container mounts for the workers file (see CONTAINER_WORKERS_DIR for why not the file)."""
        return posixpath.dirname(self.workers_path)

    @property
    def workers_digest(self) -> str:
        """Digest of the workers file: a new one re-runs the ready step (`pulumi up` waits for the new models)."""
        return hashlib.sha256(self.workers_file.encode()).hexdigest()[:16]

    @property
    def command(self) -> tuple[str, ...]:
        """The container's command: smg's own flags, the key and workers from the files the environment names."""
        return (
            "spark-llm-router",
            "--host",
            "0.0.0.0",
            "--port",
            str(self.port),
            "--prometheus-host",
            "127.0.0.1",
            "--prometheus-port",
            str(METRICS_PORT),
            *HEALTH_FLAGS,
            *RETRY_FLAGS,
        )

    @property
    def env(self) -> tuple[str, ...]:
        return (f"{KEY_FILE_VARIABLE}={CONTAINER_KEY}", f"{WORKERS_FILE_VARIABLE}={CONTAINER_WORKERS}")

    @property
    def mounts(self) -> tuple[tuple[str, str], ...]:
        """(on the head, in the container) pairs, each mounted read-only: the workers file's directory, the key file
        (a new key replaces the container, so its file's inode may stay pinned)."""
        return ((self.workers_dir, CONTAINER_WORKERS_DIR), (self.key_path, CONTAINER_KEY))

    @property
    def revision(self) -> str:
        """Digest of what replaces the router's container when it changes (the key's own digest is a secret label):
        its image, command (the port), environment and mounts; not the models it serves (`workers`), which the
        running router takes on from the file."""
        material = json.dumps(
            {"image": self.image, "command": self.command, "env": self.env, "mounts": self.mounts}, sort_keys=True
        )
        return hashlib.sha256(material.encode()).hexdigest()[:16]

    def supervisor_spec(self) -> RouterSpec:
        """The router as the supervisor makes it again when it was removed: the container `pulumi up` makes
        (components.router), marked as the supervisor's (`pulumi up` removes such a one before it makes its own)."""
        return {
            "container": self.container,
            "create": {
                "Image": self.image,
                "Cmd": list(self.command),
                "Env": list(self.env),
                "Labels": {LABEL_REVISION: self.revision, LABEL_RESTORED: "supervisor"},
                "HostConfig": {
                    "NetworkMode": "host",
                    "Binds": [f"{source}:{target}:ro" for source, target in self.mounts],
                    "RestartPolicy": {"Name": "unless-stopped"},
                    "LogConfig": {"Type": LOG_DRIVER, "Config": dict(LOG_OPTS)},
                },
            },
            "grace_seconds": SUPERVISOR_GRACE_SECONDS,
        }

    def clear_command(self, state_id: str) -> str:
        """Removes, before `pulumi up` makes its own under the same name, a router the supervisor made (labelled
        LABEL_RESTORED) and one another state made (LABEL_OWNER not `state_id`: another checkout's, a lost
        state's); a router this state's `pulumi up` made is left to `pulumi up`."""
        # `with`: a missing label prints nothing (`index` alone prints `<no value>`).
        labels = "|".join(
            f'{{{{with index .Config.Labels "{label}"}}}}{{{{.}}}}{{{{end}}}}'
            for label in (LABEL_OWNER, LABEL_RESTORED)
        )
        return (
            f"for id in $(docker ps -aq --filter name=^{self.container}$); do\n"
            f'  IFS="|" read -r made restored <<<"$(docker inspect -f {shlex.quote(labels)} "$id")"\n'
            f'  if [ -n "$restored" ] || [ "$made" != {shlex.quote(state_id)} ]; then\n'
            '    docker rm -f "$id" >/dev/null\n'
            "    why=${restored:+made by the supervisor}\n"
            '    echo "removed router ${id:0:12}: ${why:-made by another state (owner ${made:-unknown})}"\n'
            "  fi\n"
            "done\n"
            "echo 'no router of the supervisor or of another state left'\n"
        )

    def ready_command(self) -> str:
        """The head's step after the container started or the workers file changed: the launcher in the container
        waits until smg lists exactly the file's models, each under its own name, healthy (it reads the key where smg
        does: the key never leaves the container)."""
        return f"docker exec {self.container} spark-llm-router --wait-ready {READY_SECONDS} --port {self.port}"


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def engine_behind_router(cfg: GroupConfig) -> GroupConfig:
    """With a router, the engine's API listens on the head's fabric address (the router reaches it there, the
    operator's side does not), unless spark-llm:engine.host was set: then as the user said."""
    if cfg.router is None or "host" in cfg.engine.model_fields_set:
        return cfg
    return cfg.with_engine(cfg.engine.model_copy(update={"host": cfg.head.fabric_address}))


def router_endpoint(cfg: StackConfig) -> str | None:
    """The router's URL at the head's address as this machine reaches it; None without a router."""
    return f"http://{_url_host(cfg.head.host)}:{cfg.router.port}" if cfg.router else None


def router_plan(cfg: StackConfig, workers: Sequence[tuple[str, str]]) -> RouterPlan | None:
    """The router for `workers` ((model name, engine URL) pairs, one per model); None without spark-llm:router."""
    if cfg.router is None:
        return None
    directory = remote_dir(cfg.head.user)
    return RouterPlan(
        image=cfg.router.image,
        port=cfg.router.port,
        container=CONTAINER,
        workers=tuple(workers),
        workers_path=f"{directory}/{WORKERS_DIR_NAME}/{WORKERS_NAME}",
        key_path=f"{directory}/{KEY_NAME}",
        endpoint=router_endpoint(cfg) or "",
    )


class ServingGroup(Protocol):
    """What the router needs of an engine group's plan (spark_llm.plan.deployment.DeploymentPlan, which imports this
    module: named here by shape)."""

    @property
    def model_name(self) -> str: ...
    @property
    def api_address(self) -> str: ...
    @property
    def port(self) -> int: ...


def engine_worker(plan: ServingGroup) -> tuple[str, str]:
    """The group's model as the router registers it: (its name in the API, its engine's URL as the head reaches it)."""
    return plan.model_name, f"http://{plan.api_address}:{plan.port}"
