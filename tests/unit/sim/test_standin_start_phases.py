"""The stand-in's start phases: every phase's lines in the real engines' order, and the phase knobs.

STANDIN_PHASE_SECONDS sets how long a phase takes; STANDIN_HANG_IN_PHASE stops ranks for good in a phase, after its
first line. The lines are checked against the program's own parser in tests/unit/plan/start/test_start_phases.py.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from tests.unit.sim.standin_group import MODEL_PATH, EngineGroup, EngineNode, engine_env, free_port
from tests.unit.sim.test_standin_vllm import VLLM_SERVE, VLLMGroup

# The first line of each phase (or the line the phase starts after) and its last, in start order.
SGLANG_2026 = [
    "Init torch distributed begin.",
    "Init torch distributed ends. elapsed=",
    "Load weight begin. avail mem=",
    "Load weight end. elapsed=",
    "KV Cache is allocated. dtype: torch.bfloat16, #tokens:",
    "Memory pool end. avail mem=",
    "Capture target decode CUDA graph begin. backend=full",
    "Capture target decode CUDA graph end. elapsed=",
    "max_total_num_tokens=",
    "INFO:     Application startup complete.",
    "The server is fired up and ready to roll!",
]
SGLANG_0_5_5 = [
    "Init torch distributed begin.",
    "Init torch distributed ends. mem usage=",
    "Load weight begin. avail mem=",
    "Load weight end. type=",
    "KV Cache is allocated. #tokens:",
    "Memory pool end. avail mem=",
    "Capture cuda graph begin. This can take up to several minutes.",
    "Capture cuda graph end. Time elapsed:",
    "The server is fired up and ready to roll!",
]
VLLM_HEAD = [
    "[parallel_state.py:1208] world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:",
    "[parallel_state.py:1494] rank 0 in world size 2 is assigned as DP rank 0",
    "[gpu_model_runner.py:2602] Starting to load model /models/standin-test...",
    "[default_loader.py:384] Loading weights took ",
    "[gpu_model_runner.py:2634] Model loading took 0.0000 GiB memory and ",
    "[backends.py:643] Using cache directory: ",
    "[monitor.py:34] torch.compile takes ",
    "[gpu_worker.py:298] Available KV cache memory: ",
    "[kv_cache_utils.py:1087] GPU KV cache size: 8,192 tokens",
    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):",
    "[gpu_model_runner.py:3480] Graph capturing finished in ",
    "[api_server.py:602] Starting vLLM server on http://127.0.0.1:",
    "INFO:     Application startup complete.",
]
VLLM_WORKER = [
    "(Worker_TP1 pid=",
    "[parallel_state.py:1494] rank 1 in world size 2 is assigned as DP rank 0",
    "[default_loader.py:384] Loading weights took ",
    "[monitor.py:34] torch.compile takes ",
    "[gpu_worker.py:298] Available KV cache memory: ",
    "[gpu_model_runner.py:3480] Graph capturing finished in ",
    "Headless worker is part of the group",
]
SGLANG_TIME = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) TP\d+\] ")
HUNG_SECONDS = 2.0  # how long a hung rank is watched for a line it must never print


def assert_in_order(log: str, expected: list[str]) -> None:
    position = 0
    for text in expected:
        found = log.find(text, position)
        assert found >= 0, f"{text!r} missing after position {position} of:\n{log}"
        position = found + len(text)


def line_time(log: str, text: str) -> datetime:
    line = next(line for line in log.splitlines() if text in line)
    match = SGLANG_TIME.match(line)
    assert match, line
    return datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S")


def assert_stays_silent(node: EngineNode, absent: str) -> None:
    """The hung rank lives on and never prints `absent`, for HUNG_SECONDS."""
    deadline = time.monotonic() + HUNG_SECONDS
    while time.monotonic() < deadline:
        assert node.process.poll() is None, node.log()
        assert absent not in node.log()
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("version", "expected"), [("0.5.23", SGLANG_2026), ("0.5.17", SGLANG_2026), ("0.5.5", SGLANG_0_5_5)]
)
def test_sglang_prints_every_phase_in_order(
    new_group: Callable[..., EngineGroup], version: str, expected: list[str]
) -> None:
    group = new_group(2)
    env = {"SPARK_LLM_ENGINE_VERSION": version}
    head, worker = group.start(0, env=env), group.start(1, env=env)
    head.wait_for_log("The server is fired up and ready to roll!")
    worker.wait_for_log("Dummy health check server serving")
    assert_in_order(head.log(), expected)
    assert_in_order(worker.log(), [*expected[:-3], "Starting dummy health check server at 127.0.0.1:"])
    assert "fired up" not in worker.log()


def test_vllm_prints_every_phase_in_order_on_the_head_and_a_headless_worker(
    new_vllm_group: Callable[..., VLLMGroup],
) -> None:
    group = new_vllm_group(2, version="0.33.0")
    head, worker = group.start(0), group.start(1)
    head.wait_for_log("INFO:     Application startup complete.")
    worker.wait_for_log("Headless worker is part of the group")
    assert_in_order(head.log(), VLLM_HEAD)
    assert_in_order(worker.log(), VLLM_WORKER)
    assert "GPU KV cache size" not in worker.log()  # the engine core on the head sizes the cache


def test_vllm_0_11_words_model_loading_and_the_api_server_as_it_did(tmp_path: Path) -> None:
    # 0.11 has no --nnodes: one node, as the Ray profile's head runs it.
    command = [*VLLM_SERVE, MODEL_PATH, "--host", "127.0.0.1", "--port", str(free_port())]
    log_path = tmp_path / "vllm-0.11.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, env=engine_env({"SPARK_LLM_ENGINE_VERSION": "0.11.0"})
        )
    node = EngineNode(0, 0, log_path, process)
    try:
        node.wait_for_log("INFO:     Application startup complete.")
    finally:
        process.kill()
        process.wait()
    assert re.search(r"Model loading took 0\.0000 GiB and [\d.]+ seconds", node.log())
    assert "Compiling a graph for dynamic shape takes" in node.log()
    assert "[api_server.py:1971] Starting vLLM API server 0 on http://127.0.0.1:" in node.log()


def test_a_phase_takes_the_seconds_its_knob_gives(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(1)
    head = group.start(0, env={"STANDIN_PHASE_SECONDS": "weights=1.5,graph=0"})
    head.wait_for_log("The server is fired up and ready to roll!")
    log = head.log()
    gap = (line_time(log, "Load weight end.") - line_time(log, "Load weight begin.")).total_seconds()
    assert 1 <= gap <= 2  # whole seconds in the timestamps
    weights = float(re.search(r"Load weight end\. elapsed=([\d.]+) s", log)[1])  # type: ignore[index]
    assert 1.5 <= weights < 2.5
    assert float(re.search(r"CUDA graph end\. elapsed=([\d.]+) s", log)[1]) < 0.5  # type: ignore[index]


def test_a_default_start_spends_well_under_a_second_in_its_phases(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(1)
    head = group.start(0)
    head.wait_for_log("The server is fired up and ready to roll!")
    elapsed = [float(seconds) for seconds in re.findall(r"elapsed=([\d.]+) s", head.log())]
    assert len(elapsed) == 3 and sum(elapsed) < 0.5  # dist_init, weights, graph


def test_a_worker_hung_in_dist_init_prints_its_begin_line_only_and_stays_alive(
    new_group: Callable[..., EngineGroup],
) -> None:
    group = new_group(2, dist_timeout=2)
    knobs = {"STANDIN_HANG_IN_PHASE": "dist_init@1"}
    head, hung = group.start(0, env=knobs), group.start(1, env=knobs)
    hung.wait_for_log("Init torch distributed begin.")
    assert head.wait_for_exit() == 1  # it waited for rank 1 at the rendezvous, as for a rank stuck in NCCL's init
    assert "Missing node ranks: [1]" in head.log()
    assert_stays_silent(hung, "Init torch distributed ends.")
    assert hung.health() == 503


def test_the_head_hung_in_graph_capture_never_serves(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(2)
    knobs = {"STANDIN_HANG_IN_PHASE": "graph@0"}
    head, worker = group.start(0, env=knobs), group.start(1, env=knobs)
    worker.wait_for_log("Dummy health check server serving")  # the worker went through every phase
    head.wait_for_log("Capture target decode CUDA graph begin.")
    log_so_far = head.log()
    assert_stays_silent(head, "CUDA graph end.")
    assert head.log() == log_so_far  # nothing more at all
    assert head.health() == 503


def test_a_vllm_worker_hung_in_weight_loading_stops_after_starting_to_load(
    new_vllm_group: Callable[..., VLLMGroup],
) -> None:
    group = new_vllm_group(2)
    knobs = {"STANDIN_HANG_IN_PHASE": "weights@1"}
    head, hung = group.start(0, env=knobs), group.start(1, env=knobs)
    head.wait_for_log("INFO:     Application startup complete.")  # unlike a real engine, the head goes on alone
    hung.wait_for_log("Starting to load model")
    assert_stays_silent(hung, "Loading weights took")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("STANDIN_PHASE_SECONDS", "weights:3", "'weights:3' is not PHASE=SECONDS"),
        ("STANDIN_PHASE_SECONDS", "weights=-1", "weights must be 0 or more seconds"),
        ("STANDIN_PHASE_SECONDS", "weights=soon", "'soon' is not a number"),
        ("STANDIN_PHASE_SECONDS", "compile=1", "'compile=1' is not PHASE=SECONDS"),  # SGLang has no compile
        ("STANDIN_HANG_IN_PHASE", "graph", "'graph' is not PHASE@NODE_RANK"),
        ("STANDIN_HANG_IN_PHASE", "graph@2", "'2' is not a node rank of this group (0 to 1 or 'all')"),
        ("STANDIN_HANG_IN_PHASE", "warmup@0", "'warmup@0' is not PHASE@NODE_RANK"),
    ],
)
def test_a_bad_phase_knob_exits_2_naming_the_variable_and_an_example(
    new_group: Callable[..., EngineGroup], name: str, value: str, message: str
) -> None:
    group = new_group(2)
    node = group.start(0, env={name: value})
    assert node.wait_for_exit() == 2
    assert f"{name}={value!r}: {message}" in node.log()
    assert "e.g. " in node.log() and "phases of sglang: dist_init, weights, kv_cache, graph, server" in node.log()


def test_disable_cuda_graph_skips_the_graph_phase_and_its_hang(new_group: Callable[..., EngineGroup]) -> None:
    # The usual way out of a capture that hangs: SGLang without CUDA graphs prints no capture lines at all.
    group = new_group(1, extra_args=("--disable-cuda-graph",))
    head = group.start(0, env={"STANDIN_HANG_IN_PHASE": "graph@0"})
    head.wait_for_log("The server is fired up and ready to roll!")
    assert "Capture" not in head.log()
    assert_in_order(head.log(), ["Memory pool end.", "max_total_num_tokens="])


@pytest.mark.parametrize(("fraction", "serves"), [("0.95", True), ("0.97", False)])
def test_a_memory_fraction_above_095_is_taken_at_parse_time_and_runs_out_of_memory_at_the_kv_cache(
    new_group: Callable[..., EngineGroup], fraction: str, serves: bool
) -> None:
    # The flag a rollback test relaunches with: SGLang takes any fraction up to 1 when it parses its arguments.
    group = new_group(1, extra_args=("--mem-fraction-static", fraction))
    head = group.start(0)
    if serves:
        head.wait_for_log("The server is fired up and ready to roll!")
        return
    assert head.wait_for_exit() == 1
    log = head.log()
    assert_in_order(log, ["Load weight end.", "KV Cache is allocated.", "Scheduler hit an exception: Traceback"])
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in log
    assert "Memory pool end." not in log and "fired up" not in log
