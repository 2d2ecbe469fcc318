"""Every recipe, made into a stack with its config keys, registers the whole program under Pulumi mocks (a
`pulumi preview`), and the program notes each place such a stack departs from its recipe (spark-llm:recipe)."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pytest

from spark_llm.config import recipe
from tests.unit.graph_mocks import dual_spark_stack_file, inputs, pinned, register

RECIPES = sorted(recipe.RECIPES_DIR.glob("*.yaml"))
SEED = "qwen3.5-122b-a10b-fp8-vllm-ray"
MINIMAX = "minimax-m2.7-nvfp4-vllm-ray"


def stack_from(r: recipe.Recipe, nodes: int = 2) -> dict:
    """The dual-spark cluster (its nodes, network, pinned keys; `nodes` of them) with the recipe's config keys merged
    over its sections, as `spark-llm init --recipe` writes them."""
    raw = pinned(dual_spark_stack_file())
    raw["nodes"] = raw["nodes"][:nodes]
    for key, value in recipe.config_keys(r).items():
        name = key.removeprefix("spark-llm:")
        raw[name] = dict(raw[name], **value) if isinstance(value, dict) else value
    return raw


@pytest.fixture
def said(monkeypatch) -> dict[str, list[str]]:
    """What the program logs in preview, by level."""
    lines: dict[str, list[str]] = {"info": [], "warn": []}
    for level, found in lines.items():
        monkeypatch.setattr(pulumi.log, level, lambda msg, *a, _found=found, **k: _found.append(msg))
    return lines


def departed(said: dict[str, list[str]], level: str) -> list[str]:
    return [line for line in said[level] if line.startswith("stack departs from recipe")]


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_a_stack_from_the_recipe_registers_every_engine_with_its_image_and_departs_from_nothing(
    monkeypatch, said, path: Path
) -> None:
    r = recipe.load(path)
    nodes = min(r.node_counts)  # the mocked cluster has two nodes: a recipe run on one Spark gets the head alone
    assert nodes <= 2, "the mocked cluster has two nodes"
    registered = register(monkeypatch, stack_from(r, nodes))
    names = [f"spark-{i}" for i in range(1, nodes + 1)]
    engines = sorted(n for n in registered if n in {f"spark-engine-{node}" for node in ("spark-1", "spark-2")})
    assert engines == [f"spark-engine-{node}" for node in names]
    # Each node's engine runs the image the recipe names (the containers take its id once it is on the node).
    for node in names:
        assert inputs(registered[f"spark-image-{node}-image"])["name"] == r.image
    assert departed(said, "info") == departed(said, "warn") == []


def test_a_changed_flag_is_noted_as_the_one_departure_from_the_recipe(monkeypatch, said) -> None:
    raw = stack_from(recipe.by_name(MINIMAX))
    flags = list(raw["engine"]["flags"])
    flags[flags.index("--max-model-len") + 1] = "65536"
    raw["engine"] = dict(raw["engine"], flags=flags)
    register(monkeypatch, raw)
    assert departed(said, "info") == [
        f"stack departs from recipe {MINIMAX}: engine.flags --max-model-len 65536 (recipe: 196608)"
    ]
    assert departed(said, "warn") == []


def test_another_engine_release_than_the_recipe_ran_is_a_warning(monkeypatch, said) -> None:
    raw = stack_from(recipe.by_name(SEED))
    raw["engine"] = dict(raw["engine"], version="0.16.0")
    register(monkeypatch, raw)
    assert departed(said, "warn") == [f"stack departs from recipe {SEED}: engine.version 0.16.0 (recipe: 0.33.0)"]
    assert departed(said, "info") == []


def test_a_stack_without_a_recipe_key_notes_nothing(monkeypatch, said) -> None:
    raw = stack_from(recipe.by_name(MINIMAX))
    del raw["recipe"]
    raw["engine"] = dict(raw["engine"], flags=["--max-num-seqs", "8"])
    register(monkeypatch, raw)
    assert departed(said, "info") == departed(said, "warn") == []
