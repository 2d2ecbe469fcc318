"""Every recipe, made into a two-node stack, registers the whole program under Pulumi mocks (a `pulumi preview`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_llm.config import recipe
from tests.unit.graph_mocks import dual_spark_stack_file, inputs, pinned, register

RECIPES = sorted(recipe.RECIPES_DIR.glob("*.yaml"))


def stack_from(r: recipe.Recipe) -> dict:
    """The dual-spark cluster (its nodes, network, pinned keys) with the recipe's model, image and engine."""
    raw = pinned(dual_spark_stack_file())
    raw["model"] = dict(raw["model"], name=r.model.name)
    raw["image"] = dict(raw["image"], ref=r.image)
    raw["engine"] = dict(
        raw["engine"],
        kind=r.engine.kind,
        executor=r.engine.executor,
        version=r.engine.version,
        flags=r.flags,
        env=r.env,
    )
    return raw


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_a_stack_from_the_recipe_registers_both_engines_with_its_image(monkeypatch, path: Path) -> None:
    r = recipe.load(path)
    if 2 not in r.node_counts:
        pytest.skip("the mocked cluster has two nodes")  # every recipe so far claims two
    registered = register(monkeypatch, stack_from(r))
    engines = {n: q for n, q in registered.items() if n in ("spark-engine-spark-1", "spark-engine-spark-2")}
    assert sorted(engines) == ["spark-engine-spark-1", "spark-engine-spark-2"]
    # Each node's engine runs the image the recipe names (the containers take its id once it is on the node).
    for node in ("spark-1", "spark-2"):
        assert inputs(registered[f"spark-image-{node}-image"])["name"] == r.image
