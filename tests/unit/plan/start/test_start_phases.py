# ruff: noqa: E501 (the real engines' log lines are kept whole, as they were printed)
"""spark_llm.plan.start.phases: a node's start phases read from its log lines.

Three sources of lines: the real engines' (real_engine_logs.py: copied from logs of real runs, cited per
block), the stand-in's (run here, so its lines and the parser cannot drift apart), and small made-up logs for the
rules (a skipped phase, a reopened one, a slower rank's late line, the clocks).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from spark_llm.plan.start.phases import PROFILE_ENGINES, LogLine, NodeStart, phases_for, read_start
from tests.unit.plan.real_engine_logs import (
    SGLANG_2025,
    SGLANG_2026,
    SGLANG_CAPTURE_SETS,
    VLLM_0_20_EAGER,
    VLLM_2025_COMPILED,
)
from tests.unit.sim.conftest import new_group
from tests.unit.sim.standin_group import ENGINE_DIR, EngineGroup, engine_env, free_port, wait_until

__all__ = ["new_group"]  # the stand-in group fixture

CATALOGS = Path(__file__).resolve().parents[4] / "spark_llm" / "config" / "engine_catalogs"


def utc(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def read_at(profile: str, text: str, received: float, **options: object) -> NodeStart:
    """Every line received at one time (a log read after the fact)."""
    return read_start(profile, [LogLine(line, received) for line in text.splitlines()], **options)  # type: ignore[arg-type]


def rounded(timeline: dict[str, float]) -> dict[str, float]:
    return {name: round(seconds, 3) for name, seconds in timeline.items()}


def test_a_real_sglang_2025_start_is_read_phase_by_phase() -> None:
    start = read_at("sglang", SGLANG_2025, utc("2025-08-08 03:40:00.0"))
    assert start.done and start.phase is None
    assert rounded(start.timeline()) == {"weights": 0.0, "kv_cache": 0.0, "graph": 18.0, "server": 22.0}
    assert [phase.engine_seconds for phase in start.finished] == [None, None, 18.28, None]
    assert start.last_line is not None and start.last_line.startswith("[2025-08-08 03:35:19] Decode batch.")


def test_a_real_sglang_2026_start_ends_the_kv_cache_where_capture_begins() -> None:
    start = read_at("sglang", SGLANG_2026, utc("2026-08-17 16:53:00.0"))
    assert start.done
    assert rounded(start.timeline()) == {"weights": 0.0, "kv_cache": 3.0, "graph": 5.0, "server": 23.0}
    assert {phase.name: phase.engine_seconds for phase in start.finished}["weights"] == 100.59


def test_capture_sets_one_after_another_are_one_graph_phase() -> None:
    start = read_at("sglang", SGLANG_CAPTURE_SETS, utc("2026-07-21 08:22:03.0"))
    assert start.phase == "server" and start.since == utc("2026-07-21 08:22:02.0")
    graph = start.finished[-1]
    assert (graph.name, graph.seconds) == ("graph", 12.0)  # from the memory pool's end to the last set's end
    assert graph.engine_seconds == pytest.approx(4.56 + 1.56 + 0.74)


def test_a_real_vllm_eager_start_skips_compile_and_graph_capture() -> None:
    lines = [LogLine(text, utc(received) + 0.0) for received, text in VLLM_0_20_EAGER]
    start = read_start("vllm-native", lines)
    assert start.done
    assert rounded(start.timeline()) == {"dist_init": 0.0, "weights": 22.0, "kv_cache": 57.0, "server": 6.179}
    assert start.finished[1].engine_seconds == 20.695716
    assert start.finished[0].started == utc("2026-05-01 17:08:31.0")  # the engine's own time, read as UTC


def test_a_real_vllm_compiled_start_has_every_phase_and_waits_for_its_api_server() -> None:
    start = read_at("vllm-native", VLLM_2025_COMPILED, utc("2025-04-09 02:07:02.0"))
    assert rounded(start.timeline()) == {"weights": 1.0, "compile": 32.0, "kv_cache": 3.0, "graph": 33.0}
    assert [phase.engine_seconds for phase in start.finished] == [33.525153, 16.61, None, 33.0]
    assert (start.phase, start.since, start.done) == ("server", utc("2025-04-09 02:07:01.0"), False)
    # The same log is a whole start for a headless rank, which runs no API server.
    assert read_at("vllm-native", VLLM_2025_COMPILED, utc("2025-04-09 02:07:02.0"), head=False).done


def test_the_phase_since_and_the_stall_come_from_the_lines_and_the_callers_clock() -> None:
    lines = VLLM_2025_COMPILED.splitlines()[:6]  # up to the end of torch.compile: in the KV cache profile
    received = utc("2025-04-09 02:06:26.0")
    start = read_at("vllm-native", "\n".join(lines), received)
    assert (start.phase, start.since) == ("kv_cache", utc("2025-04-09 02:06:25.0"))
    assert start.spec is not None and start.spec.stall_seconds == 600.0
    assert start.in_phase_for(received + 60) == 61.0
    assert start.silent_for(received + 60) == 60.0
    assert not start.stalled(received + 600)
    assert start.stalled(received + 601)
    assert start.stalled(received + 31, bound=30)  # a bound from the history of earlier starts


def test_before_the_first_phase_line_there_is_no_phase_and_no_stall() -> None:
    start = read_at("sglang", "[2026-01-01 12:00:00] server_args=ServerArgs(...)\n\n", 1e9)
    assert (start.phase, start.since, start.done, start.finished) == (None, None, False, ())
    assert start.last_line == "[2026-01-01 12:00:00] server_args=ServerArgs(...)"
    assert not start.stalled(1e9 + 10**6)


def test_a_slower_ranks_late_line_does_not_step_back() -> None:
    log = """\
[2026-02-26 05:20:19 TP0] Init torch distributed ends. elapsed=13.00 s, mem usage=3.81 GB
[2026-02-26 05:20:21 TP0] Load weight begin. avail mem=283.50 GB
[2026-02-26 05:24:09 TP0] Load weight end. elapsed=228.09 s, type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, avail mem=194.04 GB, mem usage=89.58 GB.
[2026-02-26 05:24:10 TP0] KV Cache is allocated. #tokens: 3262823, KV size: 186.77 GB
[2026-02-26 05:24:12 TP7] Load weight end. elapsed=231.42 s, type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, avail mem=194.03 GB, mem usage=89.58 GB.
"""  # TP0's and TP7's lines of a GLM-5 start on 8 GPUs (a ROCm issue's log, 2026-02), in one file
    start = read_at("sglang", log, utc("2026-02-26 05:24:13.0"))
    assert (start.phase, start.since) == ("kv_cache", utc("2026-02-26 05:24:09.0"))
    assert start.last_line is not None and "TP7" in start.last_line


@pytest.mark.parametrize(
    ("line", "received", "offset", "expected"),
    [
        (
            "2026-12-02T10:00:00.250000000Z [2026-12-02 11:00:00 TP0] Init torch distributed begin.",
            "2026-12-02 10:00:01.0",
            0,
            "2026-12-02 10:00:00.25",
        ),
        (
            "[2026-12-02 11:00:00 TP0] Init torch distributed begin.",
            "2026-12-02 10:00:01.0",
            3600,
            "2026-12-02 10:00:00.0",
        ),
        (
            "(EngineCore_DP0 pid=1) INFO 12-31 23:59:59 [parallel_state.py:1208] world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://h:1 backend=nccl",
            "2027-01-01 00:00:02.0",
            0,
            "2026-12-31 23:59:59.0",
        ),
        (
            "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):   0%|",
            "2026-12-02 10:00:01.5",
            0,
            "2026-12-02 10:00:01.5",
        ),
    ],
    ids=["docker-logs-t-prefix", "engine-clock-ahead-of-utc", "vllm-year-boundary", "no-engine-time"],
)
def test_a_line_is_timed_by_the_engine_where_it_can_be(line: str, received: str, offset: float, expected: str) -> None:
    profile = "sglang" if line.find("TP0]") >= 0 else "vllm-native"
    start = read_start(profile, [LogLine(line, utc(received))], engine_utc_offset_seconds=offset)
    assert start.since == utc(expected)


def test_a_log_read_again_whole_is_as_silent_as_its_docker_times_say() -> None:
    line = "2026-12-02T10:00:00.123456789Z [2026-12-02 10:00:00 TP0] Load weight begin. avail mem=0.00 GB"
    start = read_start("sglang", [LogLine(line, utc("2026-12-02 10:20:00.0"))])  # re-read 20 minutes later
    assert start.phase == "weights" and start.last_line_at == pytest.approx(utc("2026-12-02 10:00:00.123457"))
    assert start.silent_for(utc("2026-12-02 10:20:00.0")) == pytest.approx(1200 - 0.123457)


def test_phases_per_profile_and_role() -> None:
    names = {profile: [spec.name for spec in phases_for(profile)] for profile in PROFILE_ENGINES}
    assert names == {
        "sglang": ["dist_init", "weights", "kv_cache", "graph", "server"],
        "vllm-native": ["dist_init", "weights", "compile", "kv_cache", "graph", "server"],
        "vllm-ray": ["dist_init", "weights", "compile", "kv_cache", "graph", "server"],
    }
    assert [spec.name for spec in phases_for("vllm-native", head=False)][-1] == "graph"
    assert [spec.name for spec in phases_for("sglang", head=False)][-1] == "server"  # its dummy health server
    with pytest.raises(ValueError, match="unknown engine profile 'trtllm'; known: sglang, vllm-native, vllm-ray"):
        phases_for("trtllm")


def test_the_stall_hints_name_the_usual_causes() -> None:
    for profile in PROFILE_ENGINES:
        dist_init = phases_for(profile)[0].stall_hint
        for cause in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "MTU", "firewall", "fabric"):
            assert cause in dist_init
    assert "ray status" in phases_for("vllm-ray")[0].stall_hint
    assert "ray status" not in phases_for("vllm-native")[0].stall_hint
    assert "--disable-cuda-graph" in phases_for("sglang")[3].stall_hint
    assert "--enforce-eager" in phases_for("vllm-native")[4].stall_hint
    # Generous where a 120 GB model is slow (weights, graph capture); every bound is minutes, not seconds.
    for profile in PROFILE_ENGINES:
        bounds = {spec.name: spec.stall_seconds for spec in phases_for(profile)}
        assert bounds["weights"] >= 1800 and bounds["graph"] >= 1800 and min(bounds.values()) >= 300


@pytest.mark.parametrize("profile", sorted(PROFILE_ENGINES))
def test_every_flag_a_hint_names_is_a_flag_of_the_engine(profile: str) -> None:
    engine = PROFILE_ENGINES[profile]
    accepted: set[str] = set()
    for catalog in CATALOGS.glob(f"{engine}-*.json"):
        if catalog.name.endswith(".metrics.json"):  # the release's metrics, not its flags
            continue
        accepted.update(json.loads(catalog.read_text())["all_option_strings"])
    for spec in phases_for(profile):
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*[a-z]", spec.stall_hint):
            assert flag in accepted, f"{profile} {spec.name}: {flag} is in no {engine} catalog"


# The stand-in's own output through the parser.


def standin_lines(log: str, received: float) -> list[LogLine]:
    return [LogLine(line, received) for line in log.splitlines()]


@pytest.mark.parametrize("version", ["0.5.5", "0.5.23"])
def test_the_standins_sglang_start_reads_as_every_phase_in_order(
    new_group: Callable[..., EngineGroup], version: str
) -> None:
    group = new_group(2)
    env = {"SPARK_LLM_ENGINE_VERSION": version, "STANDIN_PHASE_SECONDS": "weights=1.2"}
    head, worker = group.start(0, env=env), group.start(1, env=env)
    head.wait_for_log("The server is fired up and ready to roll!")
    worker.wait_for_log("Dummy health check server serving")
    now = time.time()
    for node, role in ((head, True), (worker, False)):
        start = read_start("sglang", standin_lines(node.log(), now), head=role)
        assert start.done, node.log()
        assert list(start.timeline()) == ["dist_init", "weights", "kv_cache", "graph", "server"]
        assert 1 <= start.timeline()["weights"] <= 2  # whole seconds in SGLang's timestamps
        if version != "0.5.5":
            assert 1.2 <= (start.finished[1].engine_seconds or 0) < 2.2


def run_standin_vllm(tmp_path: Path, *args: str, env: dict[str, str]) -> str:
    """One stand-in vLLM node until its API server is up; its whole log."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.cli.main",
        "serve",
        "/models/m",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *args,
    ]
    log_path = tmp_path / "vllm.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=ENGINE_DIR,
            env=engine_env(env),
        )
    try:
        wait_until(lambda: "Application startup complete." in log_path.read_text(), "the stand-in vLLM to start")
    finally:
        process.kill()
        process.wait()
    return log_path.read_text()


def test_the_standins_vllm_start_reads_as_every_phase_in_order(tmp_path: Path) -> None:
    log = run_standin_vllm(tmp_path, env={"STANDIN_PHASE_SECONDS": "graph=1.6"})
    start = read_start("vllm-native", standin_lines(log, time.time()))
    assert start.done
    assert list(start.timeline()) == ["dist_init", "weights", "compile", "kv_cache", "graph", "server"]
    assert (start.finished[4].engine_seconds or 0) == 2  # `Graph capturing finished in 2 secs`: 1.6, rounded


def test_the_standins_eager_vllm_start_reads_without_compile_and_graph(tmp_path: Path) -> None:
    log = run_standin_vllm(tmp_path, "--enforce-eager", env={"STANDIN_HANG_IN_PHASE": "graph@0"})
    start = read_start("vllm-native", standin_lines(log, time.time()))
    assert start.done and list(start.timeline()) == ["dist_init", "weights", "kv_cache", "server"]


def test_the_standin_hung_in_graph_capture_reads_as_a_stall_in_graph_capture(
    new_group: Callable[..., EngineGroup],
) -> None:
    group = new_group(1)
    head = group.start(0, env={"STANDIN_HANG_IN_PHASE": "graph@0"})
    head.wait_for_log("Capture target decode CUDA graph begin.")
    received = time.time()
    start = read_start("sglang", standin_lines(head.log(), received))
    assert start.phase == "graph" and not start.done
    assert list(start.timeline()) == ["dist_init", "weights", "kv_cache"]
    assert start.since is not None and abs(start.since - received) < 3
    assert start.spec is not None and "--disable-cuda-graph" in start.spec.stall_hint
    assert start.stalled(received + start.spec.stall_seconds + 1)
    assert head.process.poll() is None
