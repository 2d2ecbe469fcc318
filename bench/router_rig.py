"""The router in front of two stand-in engines on this machine's docker: what the router bench and its integration
test start, check and remove.

Two stand-in engine containers (sim/engine/build-image.sh) serve two model names, one as SGLang and one as vLLM
would, with no API key of their own; the router container (sim/router/build-image.sh: smg, the Shepherd Model
Gateway) sits in front of them on a private docker network with the API key, read from a mounted file. Every port is
published on 127.0.0.1 only. Every container and the network carry a run-unique name prefix and are removed on the
way out, whatever happened.
"""

from __future__ import annotations

import http.client
import json
import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.waits import wait_for

REPO = Path(__file__).resolve().parent.parent
ROUTER_PORT = 4000
KEY_IN_CONTAINER = "/run/secrets/router-api-key"
READY_TIMEOUT_S = 60
# smg's label in the router image (sim/router/build-image.sh), so a result names the router it measured.
VERSION_LABEL = "org.spark-llm.router.smg-version"


@dataclass(frozen=True)
class StandIn:
    """One stand-in engine: the served model name, its container name, its port inside the network."""

    model: str
    engine: str
    port: int

    def command(self) -> list[str]:
        if self.engine == "sglang":
            return ["python3", "-m", "sglang.launch_server", "--model-path", f"/srv/models/{self.model}"]
        return ["vllm", "serve", f"/srv/models/{self.model}"]


MODELS = (StandIn("alpha", "sglang", 30000), StandIn("beta", "vllm", 8000))


def image(script: str) -> str:
    """The tag a build script prints (its second-to-last stdout line), building or reusing the image."""
    result = subprocess.run([str(REPO / script)], check=True, stdout=subprocess.PIPE, text=True)
    return result.stdout.strip().splitlines()[-2]


def docker(*args: str) -> str:
    result = subprocess.run(["docker", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def published(container: str, port: int) -> str:
    """http://127.0.0.1:HOST_PORT for the container's port (docker chose the host port)."""
    return "http://" + docker("port", container, f"{port}/tcp").splitlines()[0].replace("0.0.0.0", "127.0.0.1")


def request(
    url: str, method: str = "GET", path: str = "/", body: dict | None = None, key: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One HTTP request on a new connection: (status, headers, body); connection errors raise OSError."""
    host = url.removeprefix("http://")
    connection = http.client.HTTPConnection(host, timeout=10)
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    try:
        connection.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def listed_models(router_url: str, key: str) -> list[str]:
    """The model ids the router's /v1/models lists ([] while it answers anything else)."""
    try:
        status, _, body = request(router_url, path="/v1/models", key=key)
    except OSError:
        return []
    return sorted(entry["id"] for entry in json.loads(body)["data"]) if status == 200 else []


def healthy(url: str) -> bool:
    try:
        return request(url, path="/health")[0] == 200
    except OSError:
        return False


@dataclass
class RouterRig:
    """What is running: each model's engine URL (from this machine), the router's URL, its key and version."""

    run_id: str
    key: str
    router_version: str
    router_container: str
    router_url: str = ""
    engine_urls: dict[str, str] = field(default_factory=dict)
    # The engines' addresses inside the network, as the router reaches them.
    worker_urls: dict[str, str] = field(default_factory=dict)
    engine_containers: dict[str, str] = field(default_factory=dict)

    def add_worker(self, model: str) -> int:
        """Register a running engine with the running router (smg's POST /workers): the router's model list
        changes with no restart of the router or of any engine. Returns the HTTP status (202: queued)."""
        return request(self.router_url, "POST", "/workers", {"url": self.worker_urls[model]}, key=self.key)[0]

    def memory_mib(self, container: str) -> float:
        """The container's memory use now (its cgroup, as `docker stats` reads it), in MiB."""
        usage = docker("stats", "--no-stream", "--format", "{{.MemUsage}}", container).split("/")[0].strip()
        units = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "B": 1 / 1024**2}
        unit = next(unit for unit in units if usage.endswith(unit))
        return round(float(usage.removesuffix(unit)) * units[unit], 1)

    def started_at(self, container: str) -> str:
        """When docker last started the container (a restart changes it)."""
        return docker("inspect", "-f", "{{.State.StartedAt}}", container)


@contextmanager
def router_rig(models_at_start: tuple[str, ...] = ("alpha", "beta")) -> Iterator[RouterRig]:
    """The two stand-ins and the router (registered with the engines of `models_at_start`), ready: each engine's
    /health answers 200 and the router lists those models. Everything is removed on exit."""
    engine_image = image("sim/engine/build-image.sh")
    router_image = image("sim/router/build-image.sh")
    run_id = f"spark-llm-router-{secrets.token_hex(4)}"
    rig = RouterRig(
        run_id=run_id,
        key=f"sk-router-{secrets.token_hex(16)}",
        router_version=docker(
            "image", "inspect", "-f", f'{{{{index .Config.Labels "{VERSION_LABEL}"}}}}', router_image
        ),
        router_container=f"{run_id}-router",
    )
    started: list[str] = []
    network_made = False
    with tempfile.TemporaryDirectory(prefix="spark-llm-router-") as tmp:
        key_file = Path(tmp) / "api-key"
        key_file.write_text(rig.key + "\n")
        key_file.chmod(0o400)
        try:
            docker("network", "create", "--label", f"spark-llm.router-rig={run_id}", run_id)
            network_made = True
            for standin in MODELS:
                name = f"{run_id}-{standin.model}"
                started.append(name)
                docker(
                    "run", "-d", "--name", name, "--network", run_id, "--network-alias", standin.model,
                    "-p", f"127.0.0.1::{standin.port}", engine_image, *standin.command(),
                    "--served-model-name", standin.model, "--host", "0.0.0.0", "--port", str(standin.port),
                )  # fmt: skip
                rig.engine_containers[standin.model] = name
                rig.worker_urls[standin.model] = f"http://{standin.model}:{standin.port}"
                rig.engine_urls[standin.model] = published(name, standin.port)
            for model, url in rig.engine_urls.items():
                wait_for(f"the {model} stand-in's /health to answer 200", lambda url=url: healthy(url), READY_TIMEOUT_S)
            started.append(rig.router_container)
            docker(
                "run", "-d", "--name", rig.router_container, "--network", run_id,
                "-p", f"127.0.0.1::{ROUTER_PORT}",
                "-v", f"{key_file}:{KEY_IN_CONTAINER}:ro", "-e", f"SPARK_LLM_ROUTER_API_KEY_FILE={KEY_IN_CONTAINER}",
                router_image, "spark-llm-router",
                "--worker-urls", *(rig.worker_urls[model] for model in models_at_start),
                "--host", "0.0.0.0", "--port", str(ROUTER_PORT),
            )  # fmt: skip
            rig.router_url = published(rig.router_container, ROUTER_PORT)
            wait_for(
                f"the router to list {', '.join(models_at_start)}",
                lambda: listed_models(rig.router_url, rig.key) == sorted(models_at_start),
                READY_TIMEOUT_S,
            )
            yield rig
        except BaseException:
            for name in started:
                logs = subprocess.run(["docker", "logs", "--tail", "30", name], capture_output=True, text=True)
                print(f"--- {name} (last lines) ---\n{logs.stdout}{logs.stderr}")
            raise
        finally:
            if started:
                subprocess.run(["docker", "rm", "-f", *started], capture_output=True)
            if network_made:
                subprocess.run(["docker", "network", "rm", run_id], capture_output=True)
