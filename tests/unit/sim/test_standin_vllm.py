"""The stand-in's vLLM profiles over loopback: native multi-node (`--nnodes/--node-rank/--master-addr/--headless`)
and, where Ray's wheels are cached on this machine, the Ray executor against a real local Ray cluster.

Every node is a real `python3 -m vllm.entrypoints.cli.main serve ...` process (`vllm serve` in the image) with
PYTHONPATH=sim/engine. The Ray image test across containers is sim/engine/test-ray-in-docker.sh.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from spark_llm.plan.start.phases import LogLine, phases_for, read_start
from tests.unit.sim.standin_group import (
    ENGINE_DIR,
    FINGERPRINT,
    MODEL_PATH,
    SERVED_MODEL_NAME,
    WAIT_SECONDS,
    EngineNode,
    engine_env,
    free_port,
    http_get,
    http_post,
    wait_until,
)

VLLM_SERVE = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve"]


@dataclass
class VLLMGroup:
    """The nodes of one native vLLM group on loopback: rank 0 serves the API, the others run --headless."""

    workdir: Path
    nnodes: int
    version: str = "0.33.0"
    dist_timeout: int = 60  # a group that forms never waits it out; a loaded machine (load 17) once did at 10
    master_port: int = field(default_factory=free_port)
    nodes: list[EngineNode] = field(default_factory=list)

    def start(self, node_rank: int, *, env: dict[str, str] | None = None, headless: bool | None = None) -> EngineNode:
        headless = node_rank > 0 if headless is None else headless
        port = free_port()
        command = [
            *VLLM_SERVE,
            MODEL_PATH,
            "--served-model-name",
            SERVED_MODEL_NAME,
            "--tensor-parallel-size",
            str(self.nnodes),
            "--nnodes",
            str(self.nnodes),
            "--node-rank",
            str(node_rank),
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(self.master_port),
            *(["--headless"] if headless else ["--host", "127.0.0.1", "--port", str(port)]),
        ]
        knobs = {"SPARK_LLM_ENGINE_VERSION": self.version, "STANDIN_DIST_TIMEOUT_SECONDS": str(self.dist_timeout)}
        log_path = self.workdir / f"vllm-rank{node_rank}-{len(self.nodes)}.log"
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, env=engine_env({**knobs, **(env or {})})
            )
        node = EngineNode(node_rank, port, log_path, process)
        self.nodes.append(node)
        # A headless rank has no HTTP server to wait for: wait for its first line instead.
        wait_until(
            lambda: (node.health() is not None if not headless else bool(node.log())) or process.poll() is not None,
            f"node rank {node_rank} to start",
        )
        return node

    def stop(self) -> None:
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.kill()
            node.process.wait()


@pytest.fixture
def new_vllm_group(tmp_path: Path) -> Iterator[Callable[..., VLLMGroup]]:
    groups: list[VLLMGroup] = []

    def make(nnodes: int, **options: object) -> VLLMGroup:
        group = VLLMGroup(tmp_path, nnodes, **options)
        groups.append(group)
        return group

    yield make
    for group in groups:
        group.stop()


def completion(url: str) -> dict:
    status, body = http_post(f"{url}/v1/completions", {"model": SERVED_MODEL_NAME, "prompt": "hello", "max_tokens": 6})
    assert status == 200, body
    return json.loads(body)


# Native multi-node (mp executor)


@pytest.mark.parametrize("version", ["0.16.0", "0.33.0"])
def test_head_and_two_headless_workers_form_the_group_and_serve_a_completion(
    new_vllm_group: Callable[..., VLLMGroup], version: str
) -> None:
    group = new_vllm_group(3, version=version)
    head = group.start(0)
    worker1 = group.start(1)
    head.wait_for_log("node rank 1 joined")
    assert head.health() == 503
    worker2 = group.start(2)
    wait_until(lambda: head.health() == 200, "the head's /health to turn 200")
    head.wait_for_log("INFO:     Application startup complete.")

    response = completion(head.url)
    assert response["system_fingerprint"] == FINGERPRINT
    assert response["model"] == SERVED_MODEL_NAME
    assert 0 < response["usage"]["completion_tokens"] <= 6
    assert json.loads(http_get(f"{head.url}/version")[1]) == {"version": version}
    assert f"(APIServer pid={head.process.pid}) INFO" in head.log()
    for worker in (worker1, worker2):
        worker.wait_for_log("runs no API server")
        log = worker.log()
        assert f"Launching vLLM (v{version}) headless multiproc executor, with head node address 127.0.0.1:" in log
        assert f"(Worker_TP{worker.node_rank} pid={worker.process.pid}) INFO" in log
        assert "HTTP server" not in log


def test_crash_at_init_on_a_headless_rank_exits_1_and_the_head_times_out_naming_it(
    new_vllm_group: Callable[..., VLLMGroup],
) -> None:
    # Rank 1 must join within the head's rendezvous window however loaded the machine is (at 3 s, a start slowed
    # by a load of 15 missed it and the head named ranks [1, 2]).
    group = new_vllm_group(3, dist_timeout=10)
    knobs = {"STANDIN_CRASH_AT_INIT": "2"}
    head = group.start(0, env=knobs)
    group.start(1, env=knobs)
    crashing = group.start(2, env=knobs)
    assert crashing.wait_for_exit() == 1
    log = crashing.log()
    assert "WorkerProc failed to start.\nTraceback (most recent call last):" in log
    assert "in init_torch_distributed" in log
    assert head.wait_for_exit() == 1
    assert "2/3 clients joined. Missing node ranks: [2]" in head.log()
    assert "EngineCore failed to start." in head.log()


def test_killing_a_headless_worker_ends_the_head_naming_the_rank(new_vllm_group: Callable[..., VLLMGroup]) -> None:
    group = new_vllm_group(2)
    head, worker = group.start(0), group.start(1)
    wait_until(lambda: head.health() == 200, "the group to form")
    worker.process.send_signal(signal.SIGKILL)
    assert head.wait_for_exit() == 1
    assert "Worker proc died unexpectedly, shutting down executor: node rank 1" in head.log()
    assert "EngineDeadError" in head.log()


def test_follower_started_without_headless_dies_as_vllm_does(new_vllm_group: Callable[..., VLLMGroup]) -> None:
    follower = new_vllm_group(2).start(1, headless=False)
    assert follower.wait_for_exit() == 1
    assert "AssertionError: collective_rpc should not be called on follower node" in follower.log()


# Ray executor against a real local Ray (single node on loopback; multi-node: sim/engine/test-ray-in-docker.sh)


def cached_ray_site() -> Path | None:
    """Ray's cp311 wheels as sim/engine/build-image.sh caches them, when this Python can import them."""
    if sys.version_info[:2] != (3, 11):
        return None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "spark-llm" / "ray"
    sites = sorted(cache.glob("ray-*-cp311-*"))
    return sites[-1] if sites else None


@dataclass
class LocalRay:
    """A one-node Ray cluster on loopback (`ray start --head --block --num-gpus 1`), its own temp dir and port."""

    address: str
    env: dict[str, str]
    process: subprocess.Popen
    temp_dir: Path

    def stop(self) -> None:
        # Only the processes this cluster started: its process group, then any left with its temp dir. SIGKILL, not
        # SIGTERM: on SIGTERM `ray start --block` drains for up to 30 s ("Draining for up to 30.0 seconds before
        # shutting down"), which a throwaway cluster has no use for (it was 20 s of the unit tier's 93).
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for pid in _pids_with(str(self.temp_dir)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _pids_with(text: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text.encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRay]:
    site = cached_ray_site()
    if site is None:
        pytest.skip("no cached Ray for this Python (sim/engine/build-image.sh caches it under ~/.cache/spark-llm/ray)")
    workdir = tmp_path_factory.mktemp("ray")
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # Ray's socket paths must stay short
    port = free_port()
    env = engine_env(
        {
            "PYTHONPATH": os.pathsep.join([str(ENGINE_DIR), str(site)]),
            "RAY_ADDRESS": f"127.0.0.1:{port}",
            # The node's environment, as a worker container's: a crash once, then never again.
            "STANDIN_CRASH_ONCE_FILE": str(workdir / "crashed-once"),
        }
    )
    command = [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--block"]
    command += ["--node-ip-address", "127.0.0.1", "--port", str(port), "--temp-dir", str(temp_dir)]
    command += ["--num-gpus", "1", "--num-cpus", "1", "--object-store-memory", "100000000"]
    command += ["--include-dashboard", "false", "--disable-usage-stats"]
    log_path = workdir / "ray-head.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    cluster = LocalRay(address=f"127.0.0.1:{port}", env=env, process=process, temp_dir=temp_dir)
    try:
        wait_until(
            lambda: "Ray runtime started" in log_path.read_text() or process.poll() is not None,
            "ray start --head",
            timeout=90,
        )
        assert process.poll() is None, log_path.read_text()
        yield cluster
    finally:
        cluster.stop()


def start_ray_serve(local_ray: LocalRay, workdir: Path, name: str, tp: int, timeout: int = 60) -> EngineNode:
    port = free_port()
    env = {**local_ray.env, "STANDIN_DIST_TIMEOUT_SECONDS": str(timeout)}
    env.pop("STANDIN_CRASH_ONCE_FILE")  # the knob lives in the Ray node's environment, not the driver's
    command = [*VLLM_SERVE, MODEL_PATH, "--served-model-name", SERVED_MODEL_NAME, "--distributed-executor-backend"]
    command += ["ray", "--tensor-parallel-size", str(tp), "--host", "127.0.0.1", "--port", str(port)]
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env)
    return EngineNode(0, port, log_path, process)


def test_ray_head_crash_at_init_fails_then_a_restart_forms_the_group_and_serves(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    first = start_ray_serve(local_ray, tmp_path, "first", tp=1)
    try:
        assert first.wait_for_exit(timeout=90) == 1
        log = first.log()
        assert "EngineCore failed to start." in log
        assert "RayWorkerWrapper.init_torch_distributed()" in log
        assert "in init_torch_distributed" in log

        second = start_ray_serve(local_ray, tmp_path, "second", tp=1)
        try:
            wait_until(lambda: second.health() == 200 or second.process.poll() is not None, "the Ray group", 90)
            assert second.health() == 200, second.log()
            assert completion(second.url)["system_fingerprint"] == FINGERPRINT
            assert "Ray group ranks: 0=" in second.log()
            # The head's log (the driver's lines and the actor's, through Ray) reads as a whole start.
            second.wait_for_log("INFO:     Application startup complete.")
            lines = [LogLine(line, time.time()) for line in second.log().splitlines()]
            start = read_start("vllm-ray", lines)
            assert start.done and list(start.timeline()) == [spec.name for spec in phases_for("vllm-ray")]
        finally:
            second.process.kill()
            second.process.wait()
    finally:
        if first.process.poll() is None:
            first.process.kill()
        first.process.wait()


def test_ray_head_without_enough_gpu_nodes_exits_1_saying_what_is_missing(local_ray: LocalRay, tmp_path: Path) -> None:
    started = time.monotonic()
    node = start_ray_serve(local_ray, tmp_path, "missing", tp=2, timeout=3)
    try:
        assert node.wait_for_exit(timeout=WAIT_SECONDS + 60) == 1
    finally:
        if node.process.poll() is None:
            node.process.kill()
    log = node.log()
    assert "Timed out after 3 seconds waiting for 2 GPUs in the Ray cluster: 1 present on 1 node(s)" in log
    assert "missing 1 node(s) with a GPU" in log
    assert time.monotonic() - started < 60
