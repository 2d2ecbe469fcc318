# ruff: noqa: E501 (the real engines' log lines are kept whole, as they were printed)
"""spark_llm.plan.start_phases: a node's start phases read from its log lines.

Three sources of lines: the real engines' (copied from logs of real runs published with their sources, cited per
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

from spark_llm.plan.start_phases import PROFILE_ENGINES, LogLine, NodeStart, phases_for, read_start
from tests.unit.sim.test_standin_engine import ENGINE_DIR, EngineGroup, engine_env, free_port, new_group, wait_until

__all__ = ["new_group"]  # the stand-in group fixture

CATALOGS = Path(__file__).resolve().parents[3] / "spark_llm" / "config" / "engine_catalogs"


def utc(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def read_at(profile: str, text: str, received: float, **options: object) -> NodeStart:
    """Every line received at one time (a log read after the fact)."""
    return read_start(profile, [LogLine(line, received) for line in text.splitlines()], **options)  # type: ignore[arg-type]


def rounded(timeline: dict[str, float]) -> dict[str, float]:
    return {name: round(seconds, 3) for name, seconds in timeline.items()}


# SGLang on one GPU, 2025-08 (github: a MinerU-on-Blackwell README's server log), from weight loading on.
SGLANG_2025 = """\
Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00,  4.34it/s]
[2025-08-08 03:34:38] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=13.91 GB, mem usage=1.25 GB.
[2025-08-08 03:34:38] KV Cache is allocated. #tokens: 104273, K size: 5.57 GB, V size: 5.57 GB
[2025-08-08 03:34:38] Memory pool end. avail mem=2.43 GB
[2025-08-08 03:34:38] Capture cuda graph begin. This can take up to several minutes. avail mem=1.80 GB
[2025-08-08 03:34:38] Capture cuda graph bs [1, 2, 4, 8]
Capturing batches (bs=1 avail_mem=1.72 GB): 100%|█████████████████████| 4/4 [00:18<00:00,  4.57s/it]
[2025-08-08 03:34:56] Capture cuda graph end. Time elapsed: 18.28 s. mem usage=0.11 GB. avail mem=1.70 GB.
[2025-08-08 03:34:57] max_total_num_tokens=104273, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2048, context_len=40960, available_gpu_mem=1.70 GB
[2025-08-08 03:34:58] INFO:     Started server process [1]
[2025-08-08 03:34:58] INFO:     Waiting for application startup.
[2025-08-08 03:34:58] INFO:     Application startup complete.
[2025-08-08 03:34:58] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2025-08-08 03:34:59] INFO:     127.0.0.1:38328 - "GET /get_model_info HTTP/1.1" 200 OK
[2025-08-08 03:34:59] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0,
[2025-08-08 03:35:18] INFO:     127.0.0.1:38344 - "POST /generate HTTP/1.1" 200 OK
[2025-08-08 03:35:18] The server is fired up and ready to roll!
[2025-08-08 03:35:19] Decode batch. #running-req: 1, #token: 47, token usage: 0.00, cuda graph: True, gen throughput (token/s): 2.18, #queue-req: 0,
"""

# SGLang 2026 (a Ling/Bailing deployment guide's log, 2026-08): `elapsed=`, per-capture-set graph lines, and no
# `Memory pool end` line: the KV cache phase ends where graph capture begins.
SGLANG_2026 = """\
[2026-08-17 16:52:10] Load weight end. elapsed=100.59 s, type=BailingMoeV3ForCausalLM, avail mem=97.27 GB, mem usage=15.47 GB.
[2026-08-17 16:52:12] Mamba Cache is allocated. max_mamba_cache_size: 614, conv_state size: 0.38GB, ssm_state size: 10.81GB
[2026-08-17 16:52:13] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933682, KV size: 12.45 GB
[2026-08-17 16:52:13] Linear attention kernel backend: decode=triton, prefill=triton, verify=triton
[2026-08-17 16:52:13] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=73.10 GB
Capturing batches (bs=1 avail_mem=72.47 GB): 100%|██████████| 2/2 [00:02<00:00,  1.10s/it]
[2026-08-17 16:52:18] Capture target decode CUDA graph end. elapsed=2.58 s, mem usage=0.45 GB, avail mem=72.65 GB.
[2026-08-17 16:52:18] INFO:     Started server process [1963736]
[2026-08-17 16:52:18] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-08-17 16:52:41] INFO:     127.0.0.1:37664 - "POST /generate HTTP/1.1" 200 OK
[2026-08-17 16:52:41] The server is fired up and ready to roll!
"""

# SGLang 2026 with speculative decoding (an energy-benchmark test's captured boot log, 2026-07): several capture
# sets one after the other are one graph phase; their `elapsed=` add up.
SGLANG_CAPTURE_SETS = """\
[2026-07-21 08:21:50 TP0] Memory pool end. avail mem=7.80 GB
[2026-07-21 08:21:55 TP0] Capture target verify CUDA graph begin. backend=full, num_tokens_per_bs=6, bs=[1, 2, 3, 4, 5, 6], avail mem=7.77 GB
[2026-07-21 08:22:00 TP0] Capture target verify CUDA graph end. elapsed=4.56 s, mem usage=0.38 GB, avail mem=7.39 GB.
[2026-07-21 08:22:00 TP0] Capture draft decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[1, 2, 3, 4, 5, 6], avail mem=7.39 GB
[2026-07-21 08:22:01 TP0] Capture draft decode CUDA graph end. elapsed=1.56 s, mem usage=0.38 GB, avail mem=7.01 GB.
[2026-07-21 08:22:01 TP0] Capture draft extend CUDA graph begin. backend=full, num_tokens_per_bs=6, bs=[1, 2, 3, 4, 5, 6], avail mem=7.01 GB
[2026-07-21 08:22:02 TP0] Capture draft extend CUDA graph end. elapsed=0.74 s, mem usage=0.14 GB, avail mem=6.87 GB.
"""

# vLLM 0.20 with --enforce-eager (a user's docker compose log, 2026-05; the viewer's receive times, UTC+2, kept as
# the caller's receive times): no torch.compile and no graph capture, so both phases are skipped.
VLLM_0_20_EAGER = [
    (
        "2026-05-01 17:08:28.173",
        "(EngineCore pid=187) INFO 05-01 17:08:28 [core.py:109] Initializing a V1 LLM engine (v0.20.0) with config: model='sakamakismile/Qwen3.6-27B-Text-NVFP4-MTP', enforce_eager=True",
    ),
    (
        "2026-05-01 17:08:31.587",
        "(EngineCore pid=187) INFO 05-01 17:08:31 [parallel_state.py:1402] world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://172.18.0.2:59169 backend=nccl",
    ),
    (
        "2026-05-01 17:08:31.839",
        "(EngineCore pid=187) INFO 05-01 17:08:31 [parallel_state.py:1715] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank N/A, EPLB rank N/A",
    ),
    (
        "2026-05-01 17:08:32.486",
        "(EngineCore pid=187) INFO 05-01 17:08:32 [gpu_model_runner.py:4777] Starting to load model sakamakismile/Qwen3.6-27B-Text-NVFP4-MTP...",
    ),
    ("2026-05-01 17:08:34.712", "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]"),
    ("2026-05-01 17:08:52.245", "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:17<00:00, 17.53s/it]"),
    (
        "2026-05-01 17:08:53.050",
        "(EngineCore pid=187) INFO 05-01 17:08:53 [default_loader.py:384] Loading weights took 18.35 seconds",
    ),
    (
        "2026-05-01 17:08:53.839",
        "(EngineCore pid=187) INFO 05-01 17:08:53 [gpu_model_runner.py:4879] Model loading took 17.62 GiB memory and 20.695716 seconds",
    ),
    (
        "2026-05-01 17:09:48.200",
        "(EngineCore pid=187) INFO 05-01 17:09:48 [gpu_worker.py:440] Available KV cache memory: 6.67 GiB",
    ),
    (
        "2026-05-01 17:09:48.201",
        "(EngineCore pid=187) INFO 05-01 17:09:48 [kv_cache_utils.py:1711] GPU KV cache size: 53,312 tokens",
    ),
    (
        "2026-05-01 17:09:48.201",
        "(EngineCore pid=187) INFO 05-01 17:09:48 [kv_cache_utils.py:1716] Maximum concurrency for 32,768 tokens per request: 5.15x",
    ),
    (
        "2026-05-01 17:09:50.893",
        "(EngineCore pid=187) INFO 05-01 17:09:50 [core.py:306] init engine (profile, create kv cache, warmup model) took 57.05 s",
    ),
    (
        "2026-05-01 17:09:51.189",
        "(APIServer pid=1) INFO 05-01 17:09:51 [api_server.py:598] Supported tasks: ['generate']",
    ),
    (
        "2026-05-01 17:09:55.825",
        "(APIServer pid=1) INFO 05-01 17:09:55 [api_server.py:602] Starting vLLM server on http://0.0.0.0:8000",
    ),
    ("2026-05-01 17:09:55.921", "(APIServer pid=1) INFO:     Started server process [1]"),
    ("2026-05-01 17:09:55.921", "(APIServer pid=1) INFO:     Waiting for application startup."),
    ("2026-05-01 17:09:56.179", "(APIServer pid=1) INFO:     Application startup complete."),
    ("2026-05-01 17:15:06.687", '(APIServer pid=1) INFO:     172.18.0.1:48308 - "GET /v1/models HTTP/1.1" 200 OK'),
]

# vLLM V1 in 2025-04 with torch.compile and graph capture (a GitHub issue's log, as quoted in an index of them).
VLLM_2025_COMPILED = """\
INFO 04-09 02:05:52 [loader.py:447] Loading weights took 33.15 seconds
INFO 04-09 02:05:53 [gpu_model_runner.py:1273] Model loading took 61.0374 GiB and 33.525153 seconds
INFO 04-09 02:06:09 [backends.py:416] Using cache directory: /root/.cache/vllm/torch_compile_cache/e8c79b34a0/rank_0_0 for vLLM's torch.compile
INFO 04-09 02:06:09 [backends.py:426] Dynamo bytecode transform time: 16.61 s
INFO 04-09 02:06:10 [backends.py:115] Directly load the compiled graph for shape None from the cache
INFO 04-09 02:06:25 [monitor.py:33] torch.compile takes 16.61 s in total
INFO 04-09 02:06:28 [kv_cache_utils.py:578] GPU KV cache size: 16,064 tokens
INFO 04-09 02:06:28 [kv_cache_utils.py:581] Maximum concurrency for 10,000 tokens per request: 1.61x
INFO 04-09 02:07:01 [gpu_model_runner.py:1608] Graph capturing finished in 33 secs, took 3.17 GiB
INFO 04-09 02:07:01 [core.py:162] init engine (profile, create kv cache, warmup model) took 68.69 seconds
"""


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
