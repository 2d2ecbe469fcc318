"""spark_llm.group.memory before the supervisor's restart: no restart into a node whose memory cannot hold its engine
now; a node where this group's engine still runs is not judged (the restart stops it first: its memory comes back)."""

from __future__ import annotations

from spark_llm.group.memory import GPU_SECTION, INFO_SECTION, MemorySpec, info_section, restart_held

# vLLM 0.16 at its default 0.9: MemFree is what its start gate reads.
SPEC: MemorySpec = {"engine": "vllm", "version": "0.16.0", "flags": [], "container": "spark-llm-engine", "ranks": 2}
GIB_KB = 1024**2


def sections(free_gib: int, gpu: str = "!nvidia-smi not found") -> dict[str, str]:
    info = f"MemTotal={121 * GIB_KB} MemFree={free_gib * GIB_KB} MemAvailable={free_gib * GIB_KB}"
    return {INFO_SECTION: info, GPU_SECTION: gpu}


def test_a_node_that_fits_lets_the_restart_go_ahead():
    assert restart_held([("head", sections(115), False), ("worker-1", sections(114), False)], SPEC) is None


def test_a_node_held_by_a_leftover_process_holds_the_restart_naming_the_node_and_the_process():
    leftover = sections(60, gpu=f"=4242:{50 * 1024}:old-vllm")
    why = restart_held([("head", sections(115), False), ("worker-1", leftover, False)], SPEC)
    assert why is not None and why.startswith("memory admission worker-1: refused: needs 108.9 GiB")
    assert "stop the leftover process 4242 in container old-vllm (50.0 GiB)" in why
    assert why.endswith("(no restart until it fits: fix it, or `pulumi up` after the fix)")


def test_a_node_where_our_engine_still_runs_is_not_judged():
    assert restart_held([("head", sections(10), True), ("worker-1", sections(115), False)], SPEC) is None


def test_a_node_that_cannot_be_read_holds_the_restart():
    why = restart_held([("worker-1", {INFO_SECTION: "!worker-1: ssh: connect: No route to host"}, False)], SPEC)
    assert why is not None and "worker-1: unread: cannot read its memory: worker-1: ssh: connect" in why


def test_the_heads_meminfo_as_the_supervisor_reads_it_from_its_mount():
    text = "MemTotal:       127600000 kB\nMemFree:         1000 kB\nMemAvailable:   2000 kB\nCached: 5 kB\n"
    assert info_section(text) == "MemTotal=127600000 MemFree=1000 MemAvailable=2000"
    assert info_section("") == "!no MemTotal in /proc/meminfo"
