"""Recipes: known-good configurations in recipes/*.yaml, and their fit on GB10 nodes on paper.

A recipe is checked like a stack's engine config (its flags against the release's catalog) and its memory is judged
by the start's own admission (group.memory) against a GB10 as nodes report it, so a recipe that "fits" here is
one the admission would let start on empty Sparks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spark_llm.config.base import NAMESPACE
from spark_llm.group import memory

# The recipes folder at the checkout's top (the operator CLI runs from a checkout).
RECIPES_DIR = Path(__file__).resolve().parents[2] / "recipes"
# A GB10's MemTotal as its /proc/meminfo says (../shared/notes/real-sparks.md): ~121.7 GiB of the 128 GB.
GB10_MEMTOTAL = int(121.7 * memory.GIB)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class RecipeModel(_Strict):
    name: str
    source: str
    # A Hugging Face commit, as spark-llm:model.source.revision takes it (config_keys hands it over).
    revision: str | None = Field(None, pattern=r"^[0-9a-f]{40}$")
    weights_bytes: int = Field(alias="weightsBytes", gt=0)
    weights_bytes_source: str = Field(alias="weightsBytesSource", min_length=1)


class RecipeEngine(_Strict):
    kind: Literal["sglang", "vllm"]
    executor: Literal["native", "ray"] = "native"
    version: str


class Recipe(_Strict):
    name: str
    model: RecipeModel
    engine: RecipeEngine
    image: str = Field(min_length=1)
    flags: list[str] = []
    env: dict[str, str] = {}
    node_counts: list[int] = Field(alias="nodeCounts", min_length=1)
    source: str = Field(min_length=1)

    @property
    def profile(self) -> str:
        if self.engine.kind == "sglang":
            return "SGLang"
        return "vLLM + Ray" if self.engine.executor == "ray" else "vLLM native"


class RecipeError(ValueError):
    """A recipe file that does not load: one line naming the file and the key."""


def load(path: Path) -> Recipe:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise RecipeError(f"{path}: not YAML: {e}") from None
    try:
        return Recipe.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "(top)"
        raise RecipeError(f"{path}: {key}: {err['msg']}") from None


def load_all(folder: Path | None = None) -> list[Recipe]:
    return [load(p) for p in sorted((folder or RECIPES_DIR).glob("*.yaml"))]


def known_names(folder: Path | None = None) -> list[str]:
    """The recipes' names, sorted: each file's name is its recipe's (tests/unit/config/test_recipes.py holds that)."""
    return sorted(p.stem for p in (folder or RECIPES_DIR).glob("*.yaml"))


def by_name(name: str, folder: Path | None = None) -> Recipe:
    """The recipe called `name` (RecipeError naming the known ones when there is none)."""
    path = (folder or RECIPES_DIR) / f"{name}.yaml"
    if name not in known_names(folder):
        raise RecipeError(f"no recipe {name!r}; known recipes: {', '.join(known_names(folder))}")
    return load(path)


def config_keys(recipe: Recipe) -> dict[str, object]:
    """Pure: the `spark-llm:*` stack config keys a stack started from `recipe` gets, as Pulumi.<stack>.yaml holds them.

    Each section holds only what the recipe decides; `spark-llm init --recipe` merges them over the sections it
    writes (model.path, image.mode, engine.port and the nodes stay the stack's own). A pinned revision becomes a
    Hugging Face source: the schema keeps a revision there (spark-llm:model.source), never beside the name.
    """
    model: dict[str, object] = {"name": recipe.model.name}
    if recipe.model.revision is not None:
        model["source"] = {"kind": "huggingface", "repo": recipe.model.name, "revision": recipe.model.revision}
    return {
        f"{NAMESPACE}:model": model,
        f"{NAMESPACE}:image": {"ref": recipe.image},
        f"{NAMESPACE}:engine": {
            "kind": recipe.engine.kind,
            "executor": recipe.engine.executor,
            "version": recipe.engine.version,
            "flags": list(recipe.flags),
            "env": dict(recipe.env),
        },
        f"{NAMESPACE}:recipe": recipe.name,
    }


def fit(recipe: Recipe, nodes: int) -> memory.Admission:
    """Pure: the admission's verdict for one rank of `recipe` on `nodes` empty GB10s (one GPU each)."""
    seen = memory.NodeMemory(
        "gb10", meminfo={"MemTotal": GB10_MEMTOTAL, "MemFree": GB10_MEMTOTAL, "MemAvailable": GB10_MEMTOTAL}
    )
    setting = memory.engine_memory(recipe.engine.kind, recipe.engine.version, recipe.flags)
    return memory.judge(
        seen, setting, ranks=nodes, own_container="", drop_caches=False, weights_bytes=recipe.model.weights_bytes
    )
