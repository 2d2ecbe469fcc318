"""The router in front of two stand-in engines on this machine's docker: what the router bench and its integration
test start, check and remove.

Two stand-in engine containers (sim/engine/build-image.sh) serve two model names, one as SGLang and one as vLLM
would, with no API key of their own; the router container (sim/router/build-image.sh: smg, the Shepherd Model
Gateway) sits in front of them with the API key, read from a mounted file. All three share this machine's network
(`--network host`, as the engines run on a node) and listen on free ports of 127.0.0.1 only. Not a bridge network:
this machine's requests would then go to a container address, and the sims here leave parts of 172.29/16
unreachable (a worker's fabric is kept out of the host's reach), where docker may allot a bridge (a run once waited
60 s for an engine whose log said it was ready: the likely cause). Every container carries a run-unique name and is
removed on the way out, whatever happened.
"""

from __future__ import annotations

import http.client
import json
import re
import secrets
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from spark_llm.plan.router import HEALTH_FLAGS, RETRY_FLAGS
from tests.waits import wait_for

REPO = Path(__file__).resolve().parent.parent
KEY_IN_CONTAINER = "/run/secrets/router-api-key"
READY_TIMEOUT_S = 60
# Registrations of one engine before giving up (RouterRig.add_worker says why there can be more than one).
REGISTER_ATTEMPTS = 5
# smg's label in the router image (sim/router/build-image.sh), so a result names the router it measured.
VERSION_LABEL = "org.spark-llm.router.smg-version"


@dataclass(frozen=True)
class StandIn:
    """One stand-in engine: the served model name and the engine it plays."""

    model: str
    engine: str

    def command(self) -> list[str]:
        if self.engine == "sglang":
            return ["python3", "-m", "sglang.launch_server", "--model-path", f"/srv/models/{self.model}"]
        return ["vllm", "serve", f"/srv/models/{self.model}"]


MODELS = (StandIn("alpha", "sglang"), StandIn("beta", "vllm"))


def image(script: str) -> str:
    """The tag a build script prints (its second-to-last stdout line), building or reusing the image."""
    result = subprocess.run([str(REPO / script)], check=True, stdout=subprocess.PIPE, text=True)
    return result.stdout.strip().splitlines()[-2]


def docker(*args: str) -> str:
    result = subprocess.run(["docker", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def free_ports(count: int) -> list[int]:
    """`count` ports of 127.0.0.1 nothing listens on now, each its own (the kernel's picks, all held open while it
    picks: picked one at a time, the router's port and its metrics port once came out the same, and smg refused to
    start); each is taken by a container a moment later."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


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
    """What is running: each model's engine URL, the router's URL, its key and version."""

    run_id: str
    key: str
    router_version: str
    router_container: str
    router_url: str = ""
    engine_urls: dict[str, str] = field(default_factory=dict)
    engine_containers: dict[str, str] = field(default_factory=dict)
    # How many registrations each model took (add_worker).
    registrations: dict[str, int] = field(default_factory=dict)

    def add_worker(self, model: str) -> int:
        """Register a running engine with the running router (smg's POST /workers): the router's model list
        changes with no restart of the router or of any engine. Returns how many registrations it took.

        smg 1.13.0 sometimes files a vLLM engine under the model `unknown`, `model_id` in the request or not (about
        one registration in five here; the engine's /v1/models answered its name): so the name is checked in
        GET /workers, and a wrong entry is deleted and registered again, REGISTER_ATTEMPTS times at most."""
        url = self.engine_urls[model]
        for attempt in range(1, REGISTER_ATTEMPTS + 1):
            status, _, body = request(
                self.router_url, "POST", "/workers", {"url": url, "model_id": model}, key=self.key
            )
            if status != 202:
                raise RuntimeError(f"the router refused to register {model}: HTTP {status} {body[:300]!r}")
            entry = wait_for(f"the router's worker entry for {url}", lambda: self.worker_entry(url), READY_TIMEOUT_S)
            if entry["model_id"] == model:
                return attempt
            request(self.router_url, "DELETE", f"/workers/{entry['id']}", key=self.key)
            wait_for(f"the router to drop its {entry['model_id']!r} entry", lambda: not self.worker_entry(url), 30)
        raise RuntimeError(
            f"smg filed {url} under another model {REGISTER_ATTEMPTS} times; its log:\n{self.router_log()}"
        )

    def worker_entry(self, url: str) -> dict | None:
        """The router's entry for the engine at `url` (GET /workers), if it has one."""
        status, _, body = request(self.router_url, path="/workers", key=self.key)
        if status != 200:
            return None
        return next((worker for worker in json.loads(body)["workers"] if worker["url"] == url), None)

    def memory_mib(self, container: str) -> float:
        """The container's memory use now (its cgroup, as `docker stats` reads it), in MiB."""
        usage = docker("stats", "--no-stream", "--format", "{{.MemUsage}}", container).split("/")[0].strip()
        units = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "B": 1 / 1024**2}
        unit = next(unit for unit in units if usage.endswith(unit))
        return round(float(usage.removesuffix(unit)) * units[unit], 1)

    def router_log(self) -> str:
        """The router's log lines so far that are not about one request (colour codes dropped), for a failure's
        message."""
        logs = subprocess.run(["docker", "logs", self.router_container], capture_output=True, text=True)
        lines = re.sub(r"\x1b\[[0-9;]*m", "", logs.stdout + logs.stderr).splitlines()
        return "\n".join(line for line in lines if "http_request{" not in line and "multimodal" not in line)

    def started_at(self, container: str) -> str:
        """When docker last started the container (a restart changes it)."""
        return docker("inspect", "-f", "{{.State.StartedAt}}", container)


@contextmanager
def router_rig(
    models_at_start: tuple[str, ...] = ("alpha", "beta"), router_flags: tuple[str, ...] = HEALTH_FLAGS + RETRY_FLAGS
) -> Iterator[RouterRig]:
    """The two stand-ins and the router with the engines of `models_at_start` registered, ready: each engine's
    /health answers 200 and the router lists those models. `router_flags`: smg's flags beyond its address, a
    deployment's by default (`()`: smg's own defaults). Everything is removed on exit."""
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
    with tempfile.TemporaryDirectory(prefix="spark-llm-router-") as tmp:
        key_file = Path(tmp) / "api-key"
        key_file.write_text(rig.key + "\n")
        key_file.chmod(0o400)
        try:
            *engine_ports, router_port, metrics_port = free_ports(len(MODELS) + 2)
            for standin, port in zip(MODELS, engine_ports, strict=True):
                name = f"{run_id}-{standin.model}"
                started.append(name)
                docker(
                    "run", "-d", "--name", name, "--network", "host", engine_image, *standin.command(),
                    "--served-model-name", standin.model, "--host", "127.0.0.1", "--port", str(port),
                )  # fmt: skip
                rig.engine_containers[standin.model] = name
                rig.engine_urls[standin.model] = f"http://127.0.0.1:{port}"
            for model, url in rig.engine_urls.items():
                wait_for(f"the {model} stand-in's /health to answer 200", lambda url=url: healthy(url), READY_TIMEOUT_S)
            started.append(rig.router_container)
            docker(
                "run", "-d", "--name", rig.router_container, "--network", "host",
                "-v", f"{key_file}:{KEY_IN_CONTAINER}:ro", "-e", f"SPARK_LLM_ROUTER_API_KEY_FILE={KEY_IN_CONTAINER}",
                router_image, "spark-llm-router", "--host", "127.0.0.1", "--port", str(router_port),
                # smg's metrics listen on 0.0.0.0:29000 unless told: one port per router, on loopback.
                "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port), *router_flags,
            )  # fmt: skip
            rig.router_url = f"http://127.0.0.1:{router_port}"
            # Each engine registered through the API, as every later change is: add_worker checks the model name
            # smg files it under, which `--worker-urls` would leave unchecked.
            wait_for("the router to answer /health", lambda: healthy(rig.router_url), READY_TIMEOUT_S)
            for model in models_at_start:
                rig.registrations[model] = rig.add_worker(model)
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
