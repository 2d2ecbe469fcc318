"""Stand-in engines on loopback for the tests of this folder: a group of real `python3 -m sglang.launch_server`
processes with PYTHONPATH=sim/engine (as on a sim node), each with its own port, and HTTP to them."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ENGINE_DIR = Path(__file__).resolve().parents[3] / "sim" / "engine"
MODEL_PATH = "/models/standin-test"
SERVED_MODEL_NAME = "standin-test"
FINGERPRINT = "spark-llm-standin"
WAIT_SECONDS = 15.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def http_get(url: str) -> tuple[int | None, bytes]:
    """(status, body); status None when nothing listens yet."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        try:
            return error.code, error.read()
        except http.client.IncompleteRead as partial:  # a head closing the connection as it refuses a rank
            return error.code, partial.partial
    except (urllib.error.URLError, ConnectionError):
        return None, b""


def http_post(url: str, payload: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout} s waiting for {what}")
        time.sleep(0.05)


@dataclass
class EngineNode:
    """One stand-in engine process: its node rank, HTTP port and combined stdout/stderr log."""

    node_rank: int
    port: int
    log_path: Path
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text()

    def health(self) -> int | None:
        return http_get(f"{self.url}/health")[0]

    def wait_for_log(self, text: str, timeout: float = WAIT_SECONDS) -> None:
        wait_until(lambda: text in self.log(), f"{text!r} in node rank {self.node_rank}'s log", timeout)

    def wait_for_exit(self, timeout: float = WAIT_SECONDS) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"node rank {self.node_rank} still runs after {timeout} s:\n{self.log()}") from None


@dataclass
class EngineGroup:
    """Launches the nodes of one group on loopback, each with the same rendezvous address and its own port."""

    workdir: Path
    nnodes: int
    dist_timeout: int = 60  # a group that forms never waits it out; a loaded machine (load 17) once did at 10
    extra_args: tuple[str, ...] = ()
    dist_port: int = field(default_factory=free_port)
    nodes: list[EngineNode] = field(default_factory=list)

    def start(self, node_rank: int, *, env: dict[str, str] | None = None, model_path: str = MODEL_PATH) -> EngineNode:
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "sglang.launch_server",
            "--model-path",
            model_path,
            "--served-model-name",
            SERVED_MODEL_NAME,
            "--tp",
            str(self.nnodes),
            "--nnodes",
            str(self.nnodes),
            "--node-rank",
            str(node_rank),
            "--dist-init-addr",
            f"127.0.0.1:{self.dist_port}",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--trust-remote-code",
            "--mem-fraction-static",
            "0.8",
            "--dist-timeout",
            str(self.dist_timeout),
            *self.extra_args,
        ]
        log_path = self.workdir / f"rank{node_rank}-{len(self.nodes)}.log"
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=engine_env(env))
        node = EngineNode(node_rank, port, log_path, process)
        self.nodes.append(node)
        wait_until(
            lambda: node.health() is not None or process.poll() is not None, f"node rank {node_rank}'s HTTP server"
        )
        return node

    def stop(self) -> None:
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.kill()
            node.process.wait()


def engine_env(knobs: dict[str, str] | None) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("STANDIN_") and name != "SPARK_LLM_ENGINE_VERSION"
    }
    env["PYTHONPATH"] = str(ENGINE_DIR)
    env.update(knobs or {})
    return env


def post_head(group: EngineGroup, path: str, payload: dict) -> dict:
    status, body = http_post(f"{group.nodes[0].url}{path}", payload)
    assert status == 200, body
    return json.loads(body)


def stream_head(group: EngineGroup, path: str, payload: dict) -> list[str]:
    """The `data:` payloads of a streamed response, in order."""
    body = json.dumps({**payload, "stream": True}).encode()
    request = urllib.request.Request(
        f"{group.nodes[0].url}{path}", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        lines = response.read().decode().splitlines()
    return [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
