"""The memory admission's verdicts (spark_llm.group.memory): what a rank needs against what its node gives now."""

from __future__ import annotations

import subprocess

import pytest

from spark_llm.group import memory
from spark_llm.group.memory import GIB, engine_memory, judge, parse
from spark_llm.plan.memory import probe_command

# The seeds' model: Qwen/Qwen3.5-122B-A10B-FP8, 119 GB of weights (Pulumi.dual-spark.yaml; the repository's
# per-file sizes were not found in any source this project can cite, so the total stands in for their sum).
QWEN_122B_FP8 = 119 * 10**9
# A GB10 as the unified pool shows it: 121.69 GiB total (llamastash#80, a DGX Spark), nothing else running.
GB10_TOTAL_KB = int(121.69 * 1024**2)


def meminfo(total_gib: float, free_gib: float, available_gib: float, cache_gib: float = 0.0) -> str:
    kb = 1024**2
    return (
        f"MemTotal={int(total_gib * kb)} MemFree={int(free_gib * kb)} MemAvailable={int(available_gib * kb)}"
        f" Active(file)={int(cache_gib * kb / 2)} Inactive(file)={int(cache_gib * kb / 2)}"
    )


def facts(info: str, weights: int | None = None, gpu: str = "!nvidia-smi not found") -> dict[str, str]:
    out = {memory.INFO_SECTION: info, memory.GPU_SECTION: gpu}
    if weights is not None:
        out[memory.WEIGHTS_SECTION] = str(weights)
    return out


def gb10_idle() -> str:
    return f"MemTotal={GB10_TOTAL_KB} MemFree={GB10_TOTAL_KB - 3 * 1024**2} MemAvailable={GB10_TOTAL_KB - 2 * 1024**2}"


SEEDS = engine_memory("vllm", "0.33.0", [])


@pytest.mark.parametrize(("ranks", "verdict"), [(2, memory.FITS), (1, memory.REFUSED)])
def test_the_seeds_model_fits_two_gb10s_at_tp2_and_is_refused_on_one_at_tp1(ranks, verdict):
    seen = parse("spark-1", facts(gb10_idle(), weights=QWEN_122B_FP8))
    got = judge(seen, SEEDS, ranks=ranks, own_container="spark-llm-engine", drop_caches=False)
    assert got.verdict == verdict, got.line()
    if ranks == 2:
        assert "its weights share 55.4 GiB (1/2 of 110.8 GiB)" in got.detail
        assert "needs 109.5 GiB (--gpu-memory-utilization 0.9 x 121.7 GiB" in got.detail
    else:
        assert got.detail.startswith("its weights share 110.8 GiB (1/1 of 110.8 GiB) + engine 6.0 GiB exceeds")
        assert "more ranks" in got.fix


def test_a_memfree_gate_refuses_page_cache_and_names_drop_caches_as_the_fix():
    # vLLM 0.16 judges MemFree: 70 GiB of cached weights count as used until dropped.
    old = engine_memory("vllm", "0.16.0", [])
    seen = parse("worker-1", facts(meminfo(121, 45, 115, cache_gib=70), weights=10 * GIB))
    got = judge(seen, old, ranks=2, own_container="spark-llm-engine", drop_caches=False)
    assert got.verdict == memory.REFUSED and got.blocks
    assert "has 45.0 GiB (MemFree 45.0 GiB) of 121.0 GiB" in got.detail
    assert "`pulumi config set --path spark-llm:memory.dropCaches true`" in got.fix
    dropped = judge(seen, old, ranks=2, own_container="spark-llm-engine", drop_caches=True)
    assert dropped.verdict == memory.FITS and "+ 70.0 GiB page cache dropped" in dropped.detail


def test_a_memavailable_gate_counts_page_cache_without_dropping_it():
    new = engine_memory("vllm", "0.33.0", [])
    seen = parse("worker-1", facts(meminfo(121, 40, 115, cache_gib=70)))
    assert judge(seen, new, ranks=2, own_container="e", drop_caches=False).verdict == memory.FITS


def test_our_own_engine_counts_as_coming_back_and_a_leftover_is_named_with_its_container():
    seen = parse(
        "head",
        facts(meminfo(121, 20, 20), gpu=f"=101:{90 * 1024}:spark-llm-engine 202:{30 * 1024}:old-vllm 303:512:-"),
    )
    got = judge(seen, SEEDS, ranks=2, own_container="spark-llm-engine", drop_caches=False)
    assert got.available == 110 * GIB and "+ 90.0 GiB our engine frees" in got.detail
    assert "held by others: pid 202 (old-vllm) 30.0 GiB, pid 303 (host) 0.5 GiB" in got.detail
    assert got.verdict == memory.WARN  # 110 >= 108.9, within the margin
    assert "stop the leftover process 202 in container old-vllm (30.0 GiB)" in got.fix
    assert "stop the leftover process 303 on the host (0.5 GiB)" in got.fix


def test_another_models_engine_on_the_node_is_named_as_such_not_as_a_leftover_to_stop():
    seen = parse("head", facts(meminfo(121, 20, 20), gpu=f"=101:{24 * 1024}:spark-llm-engine-embed"))
    got = judge(seen, SEEDS, ranks=2, own_container="spark-llm-engine", drop_caches=False)
    assert got.verdict == memory.REFUSED
    assert "held by others: pid 101 (spark-llm-engine-embed) 24.0 GiB" in got.detail
    assert got.fix.startswith(
        "make room beside spark-llm-engine-embed (24.0 GiB), another spark-llm engine on head: lower its model's or"
        " this model's memory setting, or move one of them to another node"
    ), got.fix
    assert "leftover" not in got.fix


def test_a_refusal_offers_the_setting_lowered_to_what_the_node_gives():
    seen = parse("worker-1", facts(meminfo(121, 60, 60), weights=20 * GIB))
    got = judge(seen, engine_memory("sglang", "0.5.23", ["--mem-fraction-static", "0.8"]), ranks=2,
                own_container="e", drop_caches=False)  # fmt: skip
    assert got.verdict == memory.REFUSED
    assert "needs 96.8 GiB (--mem-fraction-static 0.8 x 121.0 GiB" in got.detail
    assert got.fix == "lower --mem-fraction-static to 0.46"


@pytest.mark.parametrize(
    ("flags", "version", "gate", "setting"),
    [
        ([], "0.11.0", "MemFree", "--gpu-memory-utilization 0.9"),
        (["--gpu-memory-utilization=0.7"], "0.24.0", "MemAvailable", "--gpu-memory-utilization 0.7"),
        (["--kv-cache-memory-bytes", "8g"], "0.33.0", "MemAvailable", "--kv-cache-memory-bytes 8000000000"),
    ],
)
def test_vllms_setting_and_gate_by_release(flags, version, gate, setting):
    got = engine_memory("vllm", version, flags)
    assert (got.gate, got.setting()) == (gate, setting)


def test_kv_bytes_need_the_weights_plus_the_cache_plus_the_engine():
    seen = parse("n", facts(meminfo(121, 100, 100), weights=40 * GIB))
    got = judge(seen, engine_memory("vllm", "0.33.0", ["--kv-cache-memory-bytes", str(20 * GIB)]), ranks=2,
                own_container="e", drop_caches=False)  # fmt: skip
    assert got.need == 20 * GIB + 20 * GIB + memory.ENGINE_RESERVE and got.verdict == memory.FITS


@pytest.mark.parametrize(
    ("sections", "why"),
    [
        ({}, "the memory probe printed nothing"),
        ({memory.INFO_SECTION: "!cannot read /proc/meminfo"}, "cannot read /proc/meminfo"),
        ({memory.INFO_SECTION: "MemTotal=100"}, "/proc/meminfo has no MemFree, MemAvailable"),
    ],
)
def test_a_node_that_cannot_be_read_is_unread_never_fits(sections, why):
    got = judge(parse("worker-1", sections), SEEDS, ranks=2, own_container="e", drop_caches=False)
    assert got.verdict == memory.UNREAD and got.blocks
    assert (
        got.line()
        == f"memory admission worker-1: unread: cannot read its memory: {why}; fix: make the node readable over ssh"
    )


def test_the_probe_reads_this_machines_meminfo_and_weights(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "config.json").write_bytes(b"{}")
    out = subprocess.run(["bash", "-c", probe_command(str(tmp_path))], capture_output=True, text=True, check=True)
    sections = dict(line.split("\t", 1) for line in out.stdout.splitlines())
    seen = parse("here", sections)
    assert seen.error is None and seen.weights == 1000
    assert seen.meminfo is not None and seen.meminfo["MemTotal"] > 0
