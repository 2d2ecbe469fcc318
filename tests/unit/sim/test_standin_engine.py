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


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--model-path", "m", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (
            ["--model-path", "m", "--tp", "2", "--nnodes", "2", "--node-rank", "1"],
            "--dist-init-addr HOST:PORT is required",
        ),
        (
            ["--model-path", "m", "--tp", "2", "--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "127.0.0.1:1"],
            "--node-rank must be in [0, 1]",
        ),
        (["--model-path", "m", "--mem-fraction-static", "most"], "invalid float value: 'most'"),
        (["--model-path", "m", "--tp", "3", "--nnodes", "2"], "--tp-size (3) must be a positive multiple of --nnodes"),
        (["--tp", "2"], "the following arguments are required: --model-path/--model"),
    ],
)
def test_bad_command_line_exits_2_with_usage(args: list[str], error: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sglang.launch_server", *args],
        env=engine_env(None),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("usage: launch_server.py")
    assert error in result.stderr


# Command lines checked against the real engines' flag catalogs, per version

CATALOGS = ["sglang-0.5.5", "sglang-0.5.17", "sglang-0.5.23", "vllm-0.11.0", "vllm-0.16.0", "vllm-0.33.0"]
ENTRY_MODULES = {
    "sglang.launch_server": ["-m", "sglang.launch_server"],
    "sglang": ["-m", "sglang.cli.main"],
    "vllm": ["-m", "vllm.entrypoints.cli.main"],
    "vllm.entrypoints.openai.api_server": ["-m", "vllm.entrypoints.openai.api_server"],
}
PARSE_ONLY = """
import json, sys
from dataclasses import asdict
from standin_engine.command_line import parse_launch
print(json.dumps(asdict(parse_launch(sys.argv[1], sys.argv[2:]).config)))
"""


def parse_only(entry: str, args: list[str], version: str | None) -> subprocess.CompletedProcess:
    """Parse a command line as the entry point would, without starting anything; stdout is the LaunchConfig."""
    env = engine_env({"SPARK_LLM_ENGINE_VERSION": version} if version else None)
    return subprocess.run(
        [sys.executable, "-c", PARSE_ONLY, entry, *args], env=env, capture_output=True, text=True, timeout=WAIT_SECONDS
    )


def run_entry(entry: str, args: list[str], version: str | None) -> subprocess.CompletedProcess:
    """Run the entry point itself; only for command lines that exit at once (bad flags, --help)."""
    env = engine_env({"SPARK_LLM_ENGINE_VERSION": version} if version else None)
    return subprocess.run(
        [sys.executable, *ENTRY_MODULES[entry], *args], env=env, capture_output=True, text=True, timeout=WAIT_SECONDS
    )


@pytest.mark.parametrize("catalog", CATALOGS)
def test_catalog_parser_registers_exactly_the_option_strings_of_the_catalog(catalog: str) -> None:
    engine, version = catalog.split("-")
    script = f"""
import json
from standin_engine.catalog import load_catalog
from standin_engine.flags import catalog_parser
catalog = load_catalog({engine!r}, {version!r})
parser = catalog_parser(catalog, prog="check")
print(json.dumps({{"registered": sorted(set(parser._option_string_actions) - {{"-h", "--help"}}),
                   "catalog": sorted(catalog.all_option_strings)}}))
"""
    result = subprocess.run([sys.executable, "-c", script], env=engine_env(None), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    options = json.loads(result.stdout)
    assert options["registered"] == options["catalog"]
    raw = json.loads(
        (ENGINE_DIR.parents[1] / "spark_llm" / "config" / "engine_catalogs" / f"{catalog}.json").read_text()
    )
    assert len(options["catalog"]) == raw["option_string_count"]


@pytest.mark.parametrize(
    ("entry", "version", "args", "expected"),
    [
        # --language-model-only: SGLang from 0.5.18, vLLM from 0.17 (the catalogs' language_model_only)
        ("sglang.launch_server", "0.5.23", ["--model-path", "m", "--language-model-only"], {}),
        ("vllm", "0.33.0", ["serve", "m", "--language-model-only"], {}),
        ("vllm", "0.33.0", ["serve", "m", "--no-language-model-only"], {}),
        # vLLM 0.16 still has --swap-space (0.33 dropped it)
        ("vllm", "0.16.0", ["serve", "m", "--swap-space", "4"], {}),
        ("vllm", "0.11.0", ["serve", "m", "--swap-space", "4"], {}),
        # vLLM turns _ into - in flag names (FlexibleArgumentParser)
        ("vllm", "0.33.0", ["serve", "m", "--max_model_len", "4096"], {"context_length": 4096}),
        ("vllm", "0.16.0", ["serve", "m", "--max_model_len=2k"], {"context_length": 2000}),
        ("vllm", "0.11.0", ["serve", "m", "--tensor_parallel_size", "2"], {"tp_size": 2}),
        # argparse's allow_abbrev: an unambiguous prefix is accepted
        ("sglang.launch_server", "0.5.23", ["--model-path", "m", "--tensor-para", "2"], {"tp_size": 2}),
        ("sglang.launch_server", "0.5.5", ["--model-path", "m", "--tp", "2"], {"tp_size": 2}),
        ("sglang.launch_server", "0.5.17", ["--model-path", "m", "--cuda-graph-max-bs", "8"], {}),
        # aliases and negations as declared
        ("sglang.launch_server", "0.5.23", ["--model", "m", "--tensor-parallel-size", "2"], {"model_path": "m"}),
        ("vllm", "0.33.0", ["serve", "m", "-tp", "2", "-pp", "2", "--disable-expert-parallel"], {"pp_size": 2}),
        ("vllm", "0.33.0", ["serve", "m", "--no-enable-expert-parallel", "--no-trust-remote-code"], {}),
        # vLLM's dotted JSON keys and -O
        ("vllm", "0.33.0", ["serve", "m", "--compilation-config.mode", "3", "-O3"], {}),
        ("vllm", "0.11.0", ["serve", "m", "-O3"], {}),
        # the model: positional, --model moved to the positional, vLLM's default, sglang serve's positional
        ("vllm", "0.33.0", ["serve", "--model", "m2", "--port", "8001"], {"model_path": "m2", "port": 8001}),
        ("vllm", "0.33.0", ["serve"], {"model_path": "Qwen/Qwen3-0.6B", "host": "0.0.0.0", "port": 8000}),
        ("vllm.entrypoints.openai.api_server", "0.16.0", ["--model", "m3"], {"model_path": "m3"}),
        ("sglang", "0.5.23", ["serve", "m4", "--model-type", "llm"], {"model_path": "m4"}),
        ("sglang", "0.5.5", ["serve", "--model-path", "m5"], {"model_path": "m5"}),
        # multi-node flags the stand-in acts on
        (
            "vllm",
            "0.16.0",
            ["serve", "m", "-tp", "2", "-n", "2", "-r", "1", "--master-addr", "10.0.0.1", "--headless"],
            {"nnodes": 2, "node_rank": 1, "dist_init_addr": "10.0.0.1:29501", "headless": True},
        ),
        (
            "vllm",
            "0.33.0",
            ["serve", "m", "--distributed-executor-backend", "ray", "-tp", "3", "--distributed-timeout-seconds", "9"],
            {"executor_backend": "ray", "tp_size": 3, "dist_timeout": 9},
        ),
        (
            "sglang.launch_server",
            "0.5.17",
            ["--model-path", "m", "--tp-size", "2", "--nnodes", "2", "--nccl-init-addr", "[::1]:5000"],
            {"dist_init_addr": "[::1]:5000", "host": "127.0.0.1", "port": 30000},
        ),
        # the default version is the newest catalog of the engine
        ("sglang.launch_server", None, ["--model-path", "m", "--language-model-only"], {"engine_version": "0.5.23"}),
        ("vllm", None, ["serve", "m", "--language-model-only"], {"engine_version": "0.33.0"}),
    ],
)
def test_real_flags_accepted_by_that_engine_version(
    entry: str, version: str | None, args: list[str], expected: dict
) -> None:
    result = parse_only(entry, args, version)
    assert result.returncode == 0, result.stderr
    config = json.loads(result.stdout)
    assert {key: config[key] for key in expected} == expected


@pytest.mark.parametrize(
    ("entry", "version", "args", "error"),
    [
        (
            "sglang.launch_server",
            "0.5.17",
            ["--model-path", "m", "--language-model-only"],
            "unrecognized arguments: --language-model-only",
        ),
        ("vllm", "0.16.0", ["serve", "m", "--language-model-only"], "unrecognized arguments: --language-model-only"),
        ("vllm", "0.33.0", ["serve", "m", "--swap-space", "4"], "unrecognized arguments: --swap-space 4"),
        # SGLang does not normalise _ to -
        (
            "sglang.launch_server",
            "0.5.23",
            ["--model-path", "m", "--mem_fraction_static", "0.8"],
            "--mem_fraction_static",
        ),
        (
            "sglang.launch_server",
            "0.5.5",
            ["--model-path", "m", "--tensor_parallel_size", "2"],
            "--tensor_parallel_size",
        ),
        (
            "sglang.launch_server",
            "0.5.23",
            ["--model-path", "m", "--cuda-graph-max-bs", "8"],
            "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
        ),
        ("vllm", "0.11.0", ["serve", "m", "--nnodes", "2"], "unrecognized arguments: --nnodes 2"),
        ("vllm", "0.16.0", ["serve", "m", "--disable-expert-parallel"], "unrecognized arguments"),
        ("sglang.launch_server", "0.5.23", ["--model-path", "m", "--tokenizer-mode", "fast"], "invalid choice: 'fast'"),
        ("vllm", "0.33.0", ["serve", "m", "--max-lora-rank", "7"], "invalid choice: 7"),
        ("sglang", "0.5.5", ["serve", "m"], "the following arguments are required: --model-path/--model"),
        (
            "vllm",
            "0.33.0",
            ["serve", "m", "-tp", "2", "--nnodes", "2", "--distributed-executor-backend", "ray"],
            "--nnodes/--node-rank are for the mp executor backend",
        ),
        ("vllm", "0.33.0", ["serve", "m", "--distributed-executor-backend", "slurm"], "is not one of"),
    ],
)
def test_flags_rejected_by_that_engine_version_exit_2_with_its_usage(
    entry: str, version: str, args: list[str], error: str
) -> None:
    result = run_entry(entry, args, version)
    assert result.returncode == 2, result.stderr[-2000:]
    assert error in result.stderr
    assert result.stderr.startswith("usage: ")


@pytest.mark.parametrize(
    ("entry", "args", "usage", "error_prefix"),
    [
        (
            "sglang.launch_server",
            ["--model-path", "m", "--bogus"],
            "usage: launch_server.py [-h] --model-path MODEL_PATH",
            "launch_server.py: error:",
        ),
        ("sglang", ["serve", "m", "--bogus"], "usage: sglang [-h] --model-path MODEL_PATH", "sglang: error:"),
        (
            "vllm",
            ["serve", "m", "--bogus"],
            "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...",
            "vllm: error:",
        ),
        ("vllm.entrypoints.openai.api_server", ["--bogus"], "usage: api_server.py [-h]", "api_server.py: error:"),
    ],
)
def test_usage_line_and_error_prefix_are_the_real_entry_points(
    entry: str, args: list[str], usage: str, error_prefix: str
) -> None:
    result = run_entry(entry, args, None)
    assert result.returncode == 2
    assert result.stderr.startswith(usage)
    assert result.stderr.splitlines()[-1] == f"{error_prefix} unrecognized arguments: --bogus"


def test_vllm_serve_help_shows_its_short_usage() -> None:
    result = run_entry("vllm", ["serve", "--help"], "0.33.0")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: vllm serve [model_tag] [options]")
    assert "--language-model-only" in result.stdout


def test_unknown_engine_version_exits_2_listing_the_known_ones() -> None:
    result = run_entry("vllm", ["serve", "m"], "0.12.0")
    assert result.returncode == 2
    assert "known vllm versions: 0.11.0, 0.16.0, 0.33.0" in result.stderr


def test_served_model_name_without_a_positional_model_fails_as_vllm_does() -> None:
    result = run_entry("vllm", ["serve", "--port", "8001", "--served-model-name", "x"], "0.33.0")
    assert result.returncode == 1
    assert "`model` should be provided as the first positional argument" in result.stderr


def test_config_file_carries_the_api_key_and_the_v1_routes_require_it(
    new_group: Callable[..., EngineGroup], tmp_path: Path
) -> None:
    """As both engines read `--config FILE`: the key never on the command line, /v1 wants it, /health does not."""
    secret = "sk-standin-0123456789"
    config = tmp_path / "api-key.yaml"
    config.write_text(f'# written by spark-llm\napi-key: "{secret}"\n')
    group = new_group(1, extra_args=("--config", str(config)))
    head = group.start(0)
    wait_until(lambda: head.health() == 200, "the head to be healthy")
    payload = {"model": SERVED_MODEL_NAME, "prompt": "hi", "max_tokens": 2}
    assert http_post(f"{head.url}/v1/completions", payload)[0] == 401
    body = json.dumps(payload).encode()
    for header, expected in ((f"Bearer {secret}", 200), ("Bearer wrong", 401), (secret, 401)):
        request = urllib.request.Request(
            f"{head.url}/v1/completions",
            body,
            {"Content-Type": "application/json", "Authorization": header},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
        assert status == expected, header
    # The key is in neither the log (server_args) nor the process's command line.
    assert secret not in head.log()
    assert secret not in Path(f"/proc/{head.process.pid}/cmdline").read_bytes().decode()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("api-key: [a, b]\n", "plain scalars only"),
        ('api-key: "unterminated\n', "invalid double-quoted string"),
        ("- port\n", "expected `key: value`"),
    ],
)
def test_config_file_the_stand_in_cannot_read_exits_2_naming_the_line(tmp_path: Path, text: str, error: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    result = run_entry("sglang.launch_server", ["--model-path", "m", "--config", str(config)], "0.5.23")
    assert result.returncode == 2
    assert f"error: {config}:1: " in result.stderr and error in result.stderr


def test_command_line_wins_over_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("port: 1234\ntrust-remote-code: true\nhost: 127.0.0.1\n")
    sys.path.insert(0, str(ENGINE_DIR))
    try:
        from standin_engine.config_file import expand_config_file
    finally:
        sys.path.remove(str(ENGINE_DIR))
    argv = expand_config_file(["serve", "m", "--port", "999", "--config", str(config)])
    assert argv == ["serve", "m", "--port", "1234", "--trust-remote-code", "--host", "127.0.0.1", "--port", "999"]
