"""What `spark-llm init` is given: the nodes' `USER@ADDRESS[:PORT]`, --config-from files, a recipe, and what they
ask of the nodes (Wanted). Bad input is an InitError: one line, what to do next; nothing is written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from spark_llm.config import NAMESPACE
from spark_llm.config import recipe as recipes
from spark_llm.config.image import Image
from spark_llm.ops.init.checks import Reach, problems
from spark_llm.ops.init.facts import NodeFacts
from spark_llm.ops.init.stack_file import Extra


class InitError(RuntimeError):
    """Bad input or a problem found: one line (or one per problem), what to do next; nothing was written."""


@dataclass(frozen=True)
class Spec:
    user: str
    host: str
    port: int
    scanned: str | None = None  # the host key, when already scanned (a worker found among the neighbours)


def parse_spec(text: str, flag: str, default_user: str | None = None) -> Spec:
    """Pure: `USER@ADDRESS[:PORT]` (USER optional when `default_user` is given)."""
    user, at, rest = text.rpartition("@")
    if not at:
        user, rest = default_user or "", text
    host, colon, port_text = rest.partition(":")
    if not user or not host or (colon and not port_text.isdigit()) or any(c.isspace() for c in text):
        example = "nvidia@192.168.1.10" if flag == "--head" else "10.0.0.2 or nvidia@10.0.0.2:22"
        raise InitError(f"{flag} {text!r} is not USER@ADDRESS[:PORT]; e.g. {flag} {example}")
    port = int(port_text) if colon else 22
    if not 0 < port < 65536:
        raise InitError(f"{flag} {text!r}: port {port} is not 1-65535")
    return Spec(user, host, port)


def config_from(path_text: str) -> Extra:
    path = Path(path_text)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as err:
        raise InitError(f"--config-from {path}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise InitError(f"--config-from {path}: not YAML ({str(err).splitlines()[0]})") from None
    if isinstance(data, dict) and set(data) == {"config"}:
        data = data["config"] or {}
    if not isinstance(data, dict) or any(not str(k).startswith(f"{NAMESPACE}:") for k in data):
        raise InitError(
            f"--config-from {path}: expected a mapping of {NAMESPACE}: keys, e.g. '{NAMESPACE}:engine: ...'"
        )
    return Extra(dict(data), f"from --config-from {path_text}")


def recipe_named(name: str) -> recipes.Recipe:
    known = {r.name: r for r in recipes.load_all()}
    if name not in known:
        raise InitError(f"--recipe {name!r} is not in recipes/; the recipes: {', '.join(sorted(known))}")
    return known[name]


def recipe_source(chosen: recipes.Recipe) -> str:
    return f"from recipe {chosen.name} (recipes/{chosen.name}.yaml)"


@dataclass(frozen=True)
class Wanted:
    """What the merged recipe and --config-from keys ask of the nodes: GPUs, an image, a weights directory."""

    gpus: bool
    image: str
    model_path: str
    image_on: str  # where the image must be before `up`: "head" (it sends it on), "every node" (mode present), ""
    weights_bytes: int = 0  # a recipe's weights: each node's disk must hold them

    def problems(self, nodes: dict[str, NodeFacts], reaches: list[Reach]) -> list[str]:
        return problems(
            nodes, reaches, gpus=self.gpus, image=self.image, image_on=self.image_on, weights_bytes=self.weights_bytes
        )

    @classmethod
    def of(cls, merged: dict[str, tuple[Any, str]], weights_bytes: int = 0) -> Wanted:
        def section(key: str) -> dict[str, Any]:
            value = merged.get(f"{NAMESPACE}:{key}", ({}, ""))[0]
            return value if isinstance(value, dict) else {}

        image = section("image")
        mode = image.get("mode", Image.model_fields["mode"].default)
        source = image.get("source", Image.model_fields["source"].default)
        return cls(
            bool(section("engine").get("gpus", True)),
            str(image.get("ref", "")),
            str(section("model").get("path", "")),
            {"present": "every node", "transfer": "head" if source == "head" else ""}.get(mode, ""),
            weights_bytes,
        )
