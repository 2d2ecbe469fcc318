"""Placement (spark_llm.plan.placement): the models' rank needs summed per node they share, with the numbers.

The needs are the memory admission's (spark_llm.group.memory.rank_need); a GB10's MemTotal is 121.7 GiB as its
/proc/meminfo says (spark_llm.config.recipe.GB10_MEMTOTAL).
"""

from __future__ import annotations

from typing import Any

from spark_llm.config import parse
from spark_llm.config.models import Deployment
from spark_llm.group.memory import GIB
from spark_llm.plan.placement import place
from tests.unit.config.test_models import entry, listed


def deployments(*entries: dict[str, Any]) -> list[Deployment]:
    return parse(listed(*entries)).deployments()


def qwen_and_embed(embed_flags: list[str], qwen_flags: tuple[str, ...] = ("--gpu-memory-utilization", "0.895")):
    return deployments(
        entry("qwen", 30000, 20000, flags=list(qwen_flags)),
        entry("embed", 30001, 20001, ["spark-1"], flags=embed_flags),
    )


def test_two_models_that_do_not_fit_on_a_node_are_refused_with_the_numbers_and_the_setting_that_fits():
    placed = place(qwen_and_embed(["--gpu-memory-utilization", "0.1"]))
    assert not placed.fits
    assert placed.lines() == [
        "qwen: 108.9 GiB a rank on spark-1, spark-2 (--gpu-memory-utilization 0.895 x 121.7 GiB)",
        "embed: 12.2 GiB a rank on spark-1 (--gpu-memory-utilization 0.1 x 121.7 GiB)",
        "spark-1: qwen 108.9 GiB + embed 12.2 GiB = 121.1 GiB of 121.7 GiB MemTotal (4.0 GiB kept free): does not"
        " fit: lower embed's --gpu-memory-utilization to 0.07, or lower qwen's --gpu-memory-utilization to 0.86",
        "spark-2: qwen only: the memory admission judges it when it starts",
    ]


def test_the_setting_it_proposes_fits():
    placed = place(qwen_and_embed(["--gpu-memory-utilization", "0.07"]))
    assert placed.fits
    assert placed.nodes[0].line() == (
        "spark-1: qwen 108.9 GiB + embed 8.5 GiB = 117.4 GiB of 121.7 GiB MemTotal (4.0 GiB kept free): fits"
        " (4.3 GiB left)"
    )


def test_a_node_one_model_runs_on_is_left_to_the_admission_at_start():
    # Even a budget the sum would refuse: alone on its node, the node's own figures judge it when it starts.
    placed = place(
        deployments(
            entry("big", 30000, 20000, flags=["--gpu-memory-utilization", "0.99"]),
            entry("small", 30001, 20001, ["spark-1"], flags=["--gpu-memory-utilization", "0.99"]),
        )
    )
    assert not placed.fits  # on spark-1, which both share
    assert [n.line() for n in placed.nodes][1] == "spark-2: big only: the memory admission judges it when it starts"


def test_kv_cache_bytes_count_the_weights_share_when_their_size_is_known():
    found = qwen_and_embed(["--kv-cache-memory-bytes", "4g"])
    placed = place(found, weights={"embed": 8 * GIB})
    embed = placed.nodes[0].needs[1]
    # The weights on one node (8 GiB) + KV (4 GB) + the engine's own reserve (6 GiB).
    assert embed.need == 8 * GIB + 4 * 10**9 + 6 * GIB
    assert "lower embed's --kv-cache-memory-bytes to" not in placed.nodes[0].fix
    assert not placed.fits  # 108.9 + 17.7 GiB > 121.7 - 4
    unknown = place(found).lines()[1]
    assert unknown.endswith("the weights' size is not known yet: not counted)")


def test_an_sglang_model_without_a_budget_on_a_shared_node_is_refused_naming_the_flag():
    found = deployments(
        entry("qwen", 30000, 20000, flags=["--gpu-memory-utilization", "0.5"]),
        {**entry("embed", 30001, 20001, ["spark-1"]), "engine": {"kind": "sglang", "port": 30001, "distPort": 20001}},
    )
    spark_1 = place(found).nodes[0]
    assert not spark_1.fits
    assert spark_1.fix.startswith(
        "set embed's memory budget (spark-llm:models[1].engine.flags: --mem-fraction-static): without it SGLang"
    )


def test_a_given_memtotal_is_what_the_sum_is_judged_against():
    found = qwen_and_embed(["--gpu-memory-utilization", "0.05"])
    assert place(found).fits
    small = place(found, memtotal={"spark-1": 64 * GIB})
    # Fractions of a smaller node are smaller needs, but the margin kept free is not: 0.945 of 64 GiB + 4 GiB.
    assert not small.fits
    assert (
        small.nodes[0]
        .line()
        .startswith(
            "spark-1: qwen 57.3 GiB + embed 3.2 GiB = 60.5 GiB of 64.0 GiB MemTotal (4.0 GiB kept free): does not fit"
        )
    )
    assert small.lines()[0] == (
        "qwen: 57.3 GiB a rank on spark-1 (--gpu-memory-utilization 0.895 x 64.0 GiB); 108.9 GiB a rank on spark-2"
        " (--gpu-memory-utilization 0.895 x 121.7 GiB)"
    )
