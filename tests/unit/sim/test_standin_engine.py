"""The stand-in engine's launch contract over loopback: group formation, OpenAI API, failure knobs and exit codes.

Every node is a real `python3 -m sglang.launch_server` process with PYTHONPATH=sim/engine, as on a sim node.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

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


@pytest.fixture
def new_group(tmp_path: Path) -> Iterator[Callable[..., EngineGroup]]:
    groups: list[EngineGroup] = []

    def make(nnodes: int, **options: object) -> EngineGroup:
        group = EngineGroup(tmp_path, nnodes, **options)
        groups.append(group)
        return group

    yield make
    for group in groups:
        group.stop()


@pytest.fixture(scope="module")
def formed_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineGroup]:
    """A healthy head + 2 workers, shared by the API tests."""
    group = EngineGroup(tmp_path_factory.mktemp("formed"), 3, extra_args=("--context-length", "256"))
    try:
        for rank in range(3):
            group.start(rank)
        wait_until(lambda: group.nodes[0].health() == 200, "the formed group's head to be healthy")
        yield group
    finally:
        group.stop()


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


# Group formation and health


def test_health_is_503_until_the_last_rank_joins_then_200(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(3)
    head = group.start(0)
    worker1 = group.start(1)
    head.wait_for_log("node rank 1 joined")
    assert head.health() == 503
    assert worker1.health() == 503
    assert http_get(f"{head.url}/health_generate")[0] == 503

    worker2 = group.start(2)
    wait_until(lambda: head.health() == 200, "the head's /health to turn 200")
    assert http_get(f"{head.url}/health_generate")[0] == 200
    wait_until(lambda: worker1.health() == 200 and worker2.health() == 200, "the workers' /health to turn 200")
    head.wait_for_log("The server is fired up and ready to roll!")
    assert "Init torch distributed begin." in worker2.log()
    assert "Init torch distributed ends." in worker2.log()


def test_workers_retry_until_a_slow_head_listens(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(2)
    worker = group.start(1)
    head = group.start(0, env={"STANDIN_SLOW_START_SECONDS": "1.5"})
    worker.wait_for_log("The client socket has failed to connect")
    wait_until(lambda: head.health() == 200, "the slow head to become healthy")
    assert "STANDIN_SLOW_START_SECONDS" in head.log()


def test_worker_that_never_reaches_rank_0_times_out(new_group: Callable[..., EngineGroup]) -> None:
    worker = new_group(2, dist_timeout=2).start(1)
    assert worker.wait_for_exit() == 1
    assert "The client socket has timed out after 2s" in worker.log()


# OpenAI API on the head


def test_models_lists_the_served_model_name(formed_group: EngineGroup) -> None:
    status, body = http_get(f"{formed_group.nodes[0].url}/v1/models")
    assert status == 200
    models = json.loads(body)["data"]
    assert [model["id"] for model in models] == [SERVED_MODEL_NAME]
    assert models[0]["owned_by"] == FINGERPRINT


def test_completion_returns_deterministic_text_and_usage(formed_group: EngineGroup) -> None:
    payload = {"model": SERVED_MODEL_NAME, "prompt": "The capital of France is", "max_tokens": 12}
    first = post_head(formed_group, "/v1/completions", payload)
    second = post_head(formed_group, "/v1/completions", payload)
    assert first["system_fingerprint"] == FINGERPRINT
    assert first["object"] == "text_completion"
    assert first["choices"][0]["text"].strip()
    assert first["choices"][0]["text"] == second["choices"][0]["text"]
    usage = first["usage"]
    assert usage["prompt_tokens"] == 5
    assert 0 < usage["completion_tokens"] <= 12
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_chat_completion_returns_an_assistant_message_and_usage(formed_group: EngineGroup) -> None:
    response = post_head(
        formed_group,
        "/v1/chat/completions",
        {
            "model": SERVED_MODEL_NAME,
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 20,
        },
    )
    assert response["system_fingerprint"] == FINGERPRINT
    message = response["choices"][0]["message"]
    assert message["role"] == "assistant"
    assert message["content"].strip()
    assert response["usage"]["prompt_tokens"] > 0
    assert 0 < response["usage"]["completion_tokens"] <= 20


@pytest.mark.parametrize("max_tokens", [0, 1, 3])
def test_max_tokens_caps_the_completion(formed_group: EngineGroup, max_tokens: int) -> None:
    response = post_head(formed_group, "/v1/completions", {"prompt": "count to ten", "max_tokens": max_tokens})
    assert response["usage"]["completion_tokens"] == max_tokens
    assert len(response["choices"][0]["text"].split()) == max_tokens
    assert response["choices"][0]["finish_reason"] == "length"


def test_stop_string_cuts_the_completion(formed_group: EngineGroup) -> None:
    payload = {"prompt": "stop here please", "max_tokens": 30}
    full = post_head(formed_group, "/v1/completions", payload)["choices"][0]["text"]
    stop_word = full.split()[2]
    cut = post_head(formed_group, "/v1/completions", {**payload, "stop": [f" {stop_word}"]})["choices"][0]
    assert cut["text"] == full[: full.index(f" {stop_word}")]
    assert cut["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("path", "payload", "text_of"),
    [
        ("/v1/completions", {"prompt": "stream me", "max_tokens": 8}, lambda choice: choice.get("text", "")),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "stream me"}], "max_tokens": 8},
            lambda choice: choice.get("delta", {}).get("content", ""),
        ),
    ],
)
def test_streamed_response_matches_the_plain_one_and_ends_with_done(
    formed_group: EngineGroup, path: str, payload: dict, text_of: Callable[[dict], str]
) -> None:
    plain = post_head(formed_group, path, payload)
    events = stream_head(formed_group, path, {**payload, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert all(chunk["system_fingerprint"] == FINGERPRINT for chunk in chunks)
    streamed = "".join(text_of(choice) for chunk in chunks for choice in chunk["choices"])
    plain_choice = plain["choices"][0]
    assert streamed == plain_choice.get("text", plain_choice.get("message", {}).get("content"))
    assert chunks[-1]["usage"] == plain["usage"]


def test_prompt_beyond_the_context_length_is_rejected(formed_group: EngineGroup) -> None:
    status, body = http_post(f"{formed_group.nodes[0].url}/v1/completions", {"prompt": "word " * 250, "max_tokens": 16})
    assert status == 400
    assert "maximum context length of 256 tokens" in json.loads(body)["message"]


def test_workers_serve_only_health(formed_group: EngineGroup) -> None:
    worker = formed_group.nodes[1]
    assert worker.health() == 200
    assert http_get(f"{worker.url}/health_generate")[0] == 200
    assert http_get(f"{worker.url}/v1/models")[0] == 404


# Failure knobs and failures


def test_crash_at_init_exits_1_with_a_traceback_and_the_head_never_becomes_healthy(
    new_group: Callable[..., EngineGroup],
) -> None:
    # The head's rendezvous window must outlast the crashing rank's start on a loaded machine: the head is read
    # while it waits (503) before the test turns to the crash, and only then is the timeout awaited.
    group = new_group(3, dist_timeout=10)
    knobs = {"STANDIN_CRASH_AT_INIT": "1"}
    head = group.start(0, env=knobs)
    crashing = group.start(1, env=knobs)
    group.start(2, env=knobs)
    statuses: set[int | None] = set()

    def head_waiting() -> bool:
        statuses.add(head.health())
        return 503 in statuses

    wait_until(head_waiting, "the head to answer 503 while it waits at the rendezvous")
    assert crashing.wait_for_exit() == 1
    log = crashing.log()
    begin = log.index("Init torch distributed begin.")
    assert log.index("Traceback (most recent call last):") > begin
    assert "in init_torch_distributed" in log
    assert "Init torch distributed ends." not in log

    # The head waits at the rendezvous, never healthy, until --dist-timeout ends it.
    deadline = time.monotonic() + WAIT_SECONDS
    while head.process.poll() is None and time.monotonic() < deadline:
        statuses.add(head.health())
        time.sleep(0.1)
    assert head.wait_for_exit() == 1
    assert 200 not in statuses
    assert "Timed out after 10 seconds waiting for clients. 2/3 clients joined. Missing node ranks: [1]" in head.log()


def test_crash_once_file_crashes_the_first_start_only(new_group: Callable[..., EngineGroup], tmp_path: Path) -> None:
    marker = tmp_path / "crashed-once"
    group = new_group(2)
    head = group.start(0)
    first = group.start(1, env={"STANDIN_CRASH_ONCE_FILE": str(marker)})
    assert first.wait_for_exit() == 1
    assert "in init_torch_distributed" in first.log()
    assert marker.exists()

    group.start(1, env={"STANDIN_CRASH_ONCE_FILE": str(marker)})
    wait_until(lambda: head.health() == 200, "the head to become healthy after the restarted worker joined")


def test_rank_with_a_different_model_path_is_refused(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(2)
    head = group.start(0)
    mismatched = group.start(1, model_path="/models/another-model")
    assert mismatched.wait_for_exit() == 1
    head.wait_for_log("refused node rank 1")
    assert "config digest" in head.log()
    assert "refused node rank 1" in mismatched.log()
    assert head.health() == 503


def test_hung_rank_never_arrives_and_the_head_times_out(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(2, dist_timeout=2)
    knobs = {"STANDIN_HANG_BEFORE_RENDEZVOUS": "1"}
    head = group.start(0, env=knobs)
    hung = group.start(1, env=knobs)
    assert head.wait_for_exit() == 1
    assert "1/2 clients joined. Missing node ranks: [1]" in head.log()
    assert hung.process.poll() is None
    assert hung.health() == 503
    assert "Init torch distributed begin." not in hung.log()


def test_killing_a_worker_after_formation_ends_the_head_naming_the_rank(
    new_group: Callable[..., EngineGroup],
) -> None:
    group = new_group(3)
    head, worker1, worker2 = (group.start(rank) for rank in range(3))
    wait_until(lambda: head.health() == 200, "the group to form")
    worker2.process.send_signal(signal.SIGKILL)
    assert head.wait_for_exit() == 1
    assert "node rank 2" in head.log().split("ready to roll!")[1]
    assert "left the process group" in head.log()
    assert worker1.wait_for_exit() == 1
    assert "rank 0 at 127.0.0.1" in worker1.log()
