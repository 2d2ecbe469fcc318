"""Every recipe in recipes/ is checked: it loads, its flags pass its catalog, it fits each node count it claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_llm.config import engine_flags, recipe

RECIPES = sorted(recipe.RECIPES_DIR.glob("*.yaml"))
SEED = recipe.RECIPES_DIR / "qwen3.5-122b-a10b-fp8-vllm-ray.yaml"


def test_there_are_recipes() -> None:
    assert RECIPES, f"no recipe in {recipe.RECIPES_DIR}"


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_recipe_flags_pass_its_release_catalog(path: Path) -> None:
    r = recipe.load(path)
    assert r.name == path.stem, "a recipe's name is its file's name"
    problems = engine_flags.check_flags(
        r.engine.kind, r.engine.version, r.flags, engine_flags.OWNED_FLAGS[r.engine.kind]
    )
    assert problems == []


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_recipe_fits_every_node_count_it_claims(path: Path) -> None:
    r = recipe.load(path)
    for n in r.node_counts:
        verdict = recipe.fit(r, n)
        assert verdict.verdict == "fits", verdict.line()


def test_a_recipe_too_big_for_its_nodes_is_refused_on_paper(tmp_path: Path) -> None:
    # The seed's recipe with a 0.5 memory setting and a model four times larger: the weights share cannot fit.
    text = SEED.read_text().replace("flags: []", "flags: [--gpu-memory-utilization, '0.5']")
    text = text.replace("weightsBytes: 119000000000", "weightsBytes: 476000000000")
    path = tmp_path / "big.yaml"
    path.write_text(text)
    verdict = recipe.fit(recipe.load(path), 2)
    assert verdict.verdict == "refused"
    assert "--gpu-memory-utilization" in verdict.fix


def test_a_bad_recipe_names_its_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SEED.read_text().replace("kind: vllm", "kind: tgi"))
    with pytest.raises(recipe.RecipeError) as e:
        recipe.load(path)
    assert str(path) in str(e.value) and "engine.kind" in str(e.value)


def test_a_recipe_flag_its_release_does_not_take_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(SEED.read_text().replace("flags: []", "flags: [--gpu-memory-utilisation, '0.8']"))
    r = recipe.load(path)
    problems = engine_flags.check_flags(
        r.engine.kind, r.engine.version, r.flags, engine_flags.OWNED_FLAGS[r.engine.kind]
    )
    assert [p.flag for p in problems] == ["--gpu-memory-utilisation"]
