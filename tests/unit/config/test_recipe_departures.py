"""A stack's departures from its recipe (spark_llm.config.recipe_departures), its recipe config keys, and the
spark-llm:recipe key: pure, no Pulumi."""

from __future__ import annotations

import pytest

from spark_llm.config import ConfigError, parse, recipe
from spark_llm.config.recipe_departures import departures, is_warning
from tests.unit.graph_mocks import dual_spark_stack_file, pinned

MINIMAX = recipe.by_name("minimax-m2.7-nvfp4-vllm-ray")
PINNED_REVISION = "0123456789abcdef0123456789abcdef01234567"


def stack(r: recipe.Recipe, **sections: dict) -> dict:
    """The dual-spark stack with `r`'s config keys merged over its sections, then `sections` merged over those."""
    raw = pinned(dual_spark_stack_file())
    for key, value in recipe.config_keys(r).items():
        name = key.removeprefix("spark-llm:")
        raw[name] = dict(raw[name], **value) if isinstance(value, dict) else value
    for name, value in sections.items():
        raw[name] = dict(raw[name], **value)
    return raw


def with_flags(edit) -> dict:
    flags = list(MINIMAX.flags)
    edit(flags)
    return stack(MINIMAX, engine={"flags": flags})


def _set(flags: list[str], flag: str, value: str) -> None:
    flags[flags.index(flag) + 1] = value


def _drop(flags: list[str], flag: str, takes_value: bool = True) -> None:
    i = flags.index(flag)
    del flags[i : i + (2 if takes_value else 1)]


def test_a_stack_made_from_the_recipes_config_keys_parses_and_departs_from_nothing() -> None:
    for r in recipe.load_all():
        assert departures(r, parse(stack(r))) == [], r.name


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            with_flags(lambda f: _set(f, "--max-num-seqs", "8")),
            ["engine.flags --max-num-seqs 8 (recipe: 64)"],
        ),
        (
            with_flags(lambda f: _drop(f, "--kv-cache-dtype")),
            ["engine.flags --kv-cache-dtype not set (recipe: fp8_e4m3)"],
        ),
        (
            with_flags(lambda f: _drop(f, "--enable-prefix-caching", takes_value=False)),
            ["engine.flags --enable-prefix-caching not set (recipe: set)"],
        ),
        (
            with_flags(lambda f: f.extend(["--seed", "7"])),
            ["engine.flags --seed 7 (recipe: not set)"],
        ),
        # vLLM's `_` spelling and the `=` form of the same value are the same flag: no departure.
        (with_flags(lambda f: f.__setitem__(f.index("--max-num-seqs"), "--max_num_seqs")), []),
        (
            with_flags(
                lambda f: f.__setitem__(
                    slice(f.index("--max-num-seqs"), f.index("--max-num-seqs") + 2), ["--max-num-seqs=64"]
                )
            ),
            [],
        ),
        (
            stack(MINIMAX, engine={"env": {**MINIMAX.env, "OMP_NUM_THREADS": "4", "NCCL_DEBUG": "INFO"}}),
            ["engine.env OMP_NUM_THREADS 4 (recipe: 8)", "engine.env NCCL_DEBUG INFO (recipe: not set)"],
        ),
        (
            stack(MINIMAX, engine={"env": {k: v for k, v in MINIMAX.env.items() if k != "SAFETENSORS_FAST_GPU"}}),
            ["engine.env SAFETENSORS_FAST_GPU not set (recipe: 1)"],
        ),
        (stack(MINIMAX, image={"ref": "vllm-node:mine"}), ["image.ref vllm-node:mine (recipe: vllm-node)"]),
        (
            stack(MINIMAX, engine={"executor": "native"}),
            ["engine.executor native (recipe: ray)"],
        ),
        (
            stack(MINIMAX, model={"name": "other/model"}),
            ["model.name other/model (recipe: saricles/MiniMax-M2.7-NVFP4-GB10)"],
        ),
    ],
    ids=[
        "flag-value",
        "flag-removed",
        "switch-removed",
        "flag-added",
        "underscore-spelling",
        "equals-spelling",
        "env-changed-and-added",
        "env-removed",
        "image",
        "executor",
        "model-name",
    ],
)
def test_each_departure_is_one_line_naming_the_key_and_both_values(raw: dict, expected: list[str]) -> None:
    assert departures(MINIMAX, parse(raw)) == expected


def test_a_pinned_revision_the_stack_does_not_pin_is_a_departure_and_a_warning() -> None:
    pinned_recipe = MINIMAX.model_copy(update={"model": MINIMAX.model.model_copy(update={"revision": PINNED_REVISION})})
    assert departures(pinned_recipe, parse(stack(pinned_recipe))) == []
    lines = departures(pinned_recipe, parse(stack(MINIMAX)))
    assert lines == [f"model.source.revision not set (recipe: {PINNED_REVISION})"]
    assert is_warning(lines[0])


@pytest.mark.parametrize(
    ("line", "warning"),
    [
        ("engine.version 0.16.0 (recipe: 0.33.0)", True),
        ("engine.kind sglang (recipe: vllm)", True),
        ("model.name a/b (recipe: c/d)", True),
        ("engine.flags --max-num-seqs 8 (recipe: 64)", False),
        ("image.ref x (recipe: y)", False),
    ],
)
def test_another_engine_release_or_model_is_a_warning_the_rest_notes(line: str, warning: bool) -> None:
    assert is_warning(line) is warning


def test_config_keys_are_what_the_recipe_decides_under_the_namespace() -> None:
    keys = recipe.config_keys(MINIMAX)
    assert keys["spark-llm:recipe"] == "minimax-m2.7-nvfp4-vllm-ray"
    assert keys["spark-llm:model"] == {"name": "saricles/MiniMax-M2.7-NVFP4-GB10"}  # the source pins no revision
    assert keys["spark-llm:image"] == {"ref": "vllm-node"}
    assert keys["spark-llm:engine"] == {
        "kind": "vllm",
        "executor": "ray",
        "version": "0.33.0",
        "flags": MINIMAX.flags,
        "env": MINIMAX.env,
    }


def test_a_pinned_revision_becomes_the_stacks_hugging_face_source() -> None:
    pinned_recipe = MINIMAX.model_copy(update={"model": MINIMAX.model.model_copy(update={"revision": PINNED_REVISION})})
    cfg = parse(stack(pinned_recipe))
    assert cfg.model.source is not None
    assert (cfg.model.source.kind, cfg.model.source.repo, cfg.model.source.revision) == (
        "huggingface",
        MINIMAX.model.name,
        PINNED_REVISION,
    )


def test_an_unknown_recipe_names_the_key_and_lists_the_known_recipes() -> None:
    raw = stack(MINIMAX)
    raw["recipe"] = "minimax-m2.7"
    with pytest.raises(ConfigError) as err:
        parse(raw)
    message = str(err.value)
    assert "spark-llm:recipe: no recipe 'minimax-m2.7'; known recipes: " in message
    assert all(name in message for name in recipe.known_names())
