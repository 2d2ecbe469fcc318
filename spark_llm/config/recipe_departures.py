"""Where a stack departs from the recipe it started from (spark-llm:recipe): one short line per difference.

`pulumi preview` and `up` log them (components.bootstrap), so a stack that drifted from what is known to work says
so before anything runs: "engine.flags --max-model-len 65536 (recipe: 32768)". Only what a recipe decides is
compared (config_keys in spark_llm.config.recipe): the image, the engine's kind, executor, release, flags and env,
and the model's name and pinned revision. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_llm.config.engine_catalog import load_catalog
from spark_llm.config.flag_values import is_option
from spark_llm.config.group import GroupConfig
from spark_llm.config.recipe import Recipe

NOT_SET = "not set"
# A change of these is a warning in preview (another engine, release or model than the one the recipe ran);
# the rest (image, executor, flags, env) are notes.
WARNING_KEYS = ("engine.kind", "engine.version", "model.")


def _flag_values(kind: str, version: str, flags: Sequence[str]) -> dict[str, str]:
    """{flag as the release's parser names it: its value(s), "" for a switch}; a repeated flag keeps every value.

    The flags already passed their release's catalog (the schema and the recipe tests check them), so each option
    token is followed by exactly its values: grouping by option token reads them as the engine's argparse does.
    """
    catalog = load_catalog(kind, version)
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for token in flags:
        if is_option(token):
            name, eq, attached = token.partition("=")
            spec = catalog.lookup(catalog.normalize(name))
            # An alias (`-tp`) or vLLM's `_` spelling counts as the flag it stands for.
            canonical = spec[0].flag if spec is not None and not spec[1] else name
            current = found.setdefault(canonical, [])
            if eq:
                current.append(attached)
        elif current is not None:
            current.append(token)
    return {flag: " ".join(values) for flag, values in found.items()}


def _line(key: str, stack: str, recipe: str) -> str:
    return f"{key} {stack} (recipe: {recipe})"


def _shown(flag: str, value: str) -> str:
    return f"{flag} {value}" if value else flag


def departures(recipe: Recipe, cfg: GroupConfig) -> list[str]:
    """Pure: each place `cfg` departs from `recipe`, one line naming the key and both values; [] when none."""
    lines = []
    for key, stack_value, recipe_value in (
        ("model.name", cfg.model.name, recipe.model.name),
        ("image.ref", cfg.image.ref, recipe.image),
        ("engine.kind", cfg.engine.kind, recipe.engine.kind),
        ("engine.executor", cfg.engine.executor, recipe.engine.executor),
        ("engine.version", cfg.engine.version, recipe.engine.version),
    ):
        if stack_value != recipe_value:
            lines.append(_line(key, stack_value, recipe_value))
    if recipe.model.revision is not None:
        # Only a recipe that pins a revision has one to depart from.
        source = cfg.model.source
        pinned = source.revision if source is not None and source.kind == "huggingface" else None
        if pinned != recipe.model.revision:
            lines.append(_line("model.source.revision", pinned or NOT_SET, recipe.model.revision))
    ours = _flag_values(cfg.engine.kind, cfg.engine.version, cfg.engine.flags)
    theirs = _flag_values(recipe.engine.kind, recipe.engine.version, recipe.flags)
    for flag in [*theirs, *(f for f in ours if f not in theirs)]:
        if flag not in ours:
            lines.append(_line(f"engine.flags {flag}", NOT_SET, theirs[flag] or "set"))
        elif flag not in theirs:
            lines.append(_line("engine.flags", _shown(flag, ours[flag]), NOT_SET))
        elif ours[flag] != theirs[flag]:
            lines.append(_line("engine.flags", _shown(flag, ours[flag]), theirs[flag]))
    for name in [*recipe.env, *(n for n in cfg.engine.env if n not in recipe.env)]:
        stack_env, recipe_env = cfg.engine.env.get(name), recipe.env.get(name)
        if stack_env != recipe_env:
            lines.append(
                _line(
                    f"engine.env {name}",
                    stack_env if stack_env is not None else NOT_SET,
                    recipe_env if recipe_env is not None else NOT_SET,
                )
            )
    return lines


def is_warning(line: str) -> bool:
    """Whether a departure is of the engine or the model (a warning), not of a setting (a note)."""
    return line.startswith(WARNING_KEYS)
