"""The `models` section: several models in one stack, each with its own weights, image, engine and nodes.

An entry takes the single form's keys in one mapping: `name`, `path`, `source`, `purgeOnDestroy` as spark-llm:model
takes them, then `image` and `engine` as spark-llm:image and spark-llm:engine take them, and `nodes`. Its memory
budget is its engine's own setting (--gpu-memory-utilization, --mem-fraction-static, --kv-cache-memory-bytes in
engine.flags), read as the memory admission reads it (spark_llm.group.memory); spark_llm.plan.placement sums them
per node.

`deployments` gives the stack's models as one list whichever form the stack uses; `check_models` finds what two
entries cannot share (a name, a port on a node, a container on a node). Each model of several is an engine group of
its own (spark_llm.config.group.groups), led from the stack's head, where the router serves them all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from spark_llm.config.base import NAMESPACE, KeyedError
from spark_llm.config.engine import RAY_PORT, Engine
from spark_llm.config.image import Image
from spark_llm.config.model import Model
from spark_llm.config.nodes import Node, NodeName

# The single form's engine container; an entry of a list of several is `spark-llm-engine-<its name>`.
SINGLE_CONTAINER = Engine.model_fields["container_name"].default


class ModelDeployment(Model):
    """One model of the stack: its name and weights (as spark-llm:model), its image, engine and nodes."""

    image: Image = Field(description="As spark-llm:image", json_schema_extra={"example": {"ref": "vllm/vllm-openai"}})
    engine: Engine = Field(
        default_factory=Engine,
        description=(
            "As spark-llm:engine; its memory setting in flags (--gpu-memory-utilization, --mem-fraction-static,"
            " --kv-cache-memory-bytes) is the model's memory budget on each of its nodes"
        ),
        json_schema_extra={"example": {"kind": "vllm", "port": 30001, "flags": ["--gpu-memory-utilization", "0.1"]}},
    )
    nodes: list[NodeName] | None = Field(
        None,
        min_length=1,
        description=(
            "The nodes it runs on, by name, the head among them: its group is led from the head (default: every"
            " node of spark-llm:nodes)"
        ),
        json_schema_extra={"example": ["spark-1"]},
    )


@dataclass(frozen=True)
class Deployment:
    """One model the stack deploys, whichever form the stack config uses."""

    name: str
    """The API's `model`."""
    model: Model
    image: Image
    engine: Engine
    nodes: tuple[str, ...]
    """Its nodes, in spark-llm:nodes order."""
    key: str | None
    """None: the single form's identity (today's resource names and container), which a list's first entry keeps
    too; else the entry's own, for resource names beside the others'."""
    config_key: str
    """Where the stack file declares it: `spark-llm:model` or `spark-llm:models[i]`."""

    @property
    def container(self) -> str:
        return self.engine.container_name


def slug(name: str) -> str:
    """A model's name as a container name takes it: a-z, 0-9 and '-' (`Qwen/Qwen3.5` -> `qwen-qwen3-5`)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "model"


def as_single_form(entry: ModelDeployment) -> tuple[Model, Image, Engine]:
    """The entry as spark-llm:model, image and engine would hold it (a list of one deploys exactly as that)."""
    model = Model.model_validate(entry.model_dump(by_alias=True, include=set(Model.model_fields)))
    return model, entry.image, entry.engine


def deployments(
    nodes: list[Node], models: list[ModelDeployment] | None, single: tuple[Model, Image, Engine] | None
) -> list[Deployment]:
    """Pure: the stack's models as one list; the single form (or a list of one) is one, of today's identity."""
    every = tuple(n.name for n in nodes)
    if not models or len(models) == 1:
        config_key = f"{NAMESPACE}:models[0]" if models else f"{NAMESPACE}:model"
        model, image, engine = as_single_form(models[0]) if models else _required(single)
        return [Deployment(model.name, model, image, engine, every, None, config_key)]
    out = []
    for i, entry in enumerate(models):
        # The first model keeps the single form's identity (resource names, container, files on the nodes): a
        # stack that grows a second model restarts nothing that serves, and shrinks back to one the same way.
        key = None if i == 0 else slug(entry.name)
        engine = entry.engine
        if key is not None and "container_name" not in engine.model_fields_set:
            engine = engine.model_copy(update={"container_name": f"{SINGLE_CONTAINER}-{key}"})
        on = tuple(n for n in every if entry.nodes is None or n in entry.nodes)
        model, image, _ = as_single_form(entry)
        out.append(Deployment(entry.name, model, image, engine, on, key, f"{NAMESPACE}:models[{i}]"))
    return out


def _required(single: tuple[Model, Image, Engine] | None) -> tuple[Model, Image, Engine]:
    if single is None:
        raise ValueError("the single form's model, image and engine are required without spark-llm:models")
    return single


# ---------- what two entries cannot share ----------


def check_models(models: list[ModelDeployment], nodes: list[Node]) -> list[KeyedError]:
    """Every mistake of the list, each at its key under `models` (one pass: the user learns them all at once)."""
    names = [n.name for n in nodes]
    head = next((n.name for n in nodes if n.role == "head"), names[0])
    mistakes: list[KeyedError] = []
    for i, entry in enumerate(models):
        if entry.nodes is not None and head not in entry.nodes and all(n in names for n in entry.nodes):
            # Every group is led from the head: its rank 0 serves the API the router reaches, and its workers are
            # reached through the head (spark-llm:nodes' via). A model on workers only is not built yet.
            why = f"the head ({head}) is not among them: each model's group is led from the head: add it"
            mistakes.append(KeyedError(why, (i, "nodes"), [head, *entry.nodes]))
        for j, node in enumerate(entry.nodes or []):
            if node not in names:
                why = f"{node} is not in {NAMESPACE}:nodes ({', '.join(names)})"
                mistakes.append(KeyedError(why, (i, "nodes", j), names[0]))
            elif node in (entry.nodes or [])[:j]:
                mistakes.append(KeyedError(f"{node} is listed twice", (i, "nodes", j), names[0]))
        first = next((k for k, other in enumerate(models[:i]) if other.name == entry.name), None)
        if first is not None:
            why = f"{entry.name} is also the name of {NAMESPACE}:models[{first}]: each model needs a name of its own"
            mistakes.append(KeyedError(why, (i, "name"), f"{entry.name}-2"))
    if not mistakes and len(models) == 1 and models[0].nodes is not None and set(models[0].nodes) != set(names):
        # A list of one deploys as the single form, on every node: a subset would not be honoured.
        why = f"one model runs on every node of {NAMESPACE}:nodes in this version: remove nodes, or list them all"
        mistakes.append(KeyedError(why, (0, "nodes"), names))
    if mistakes or len(models) < 2:
        return mistakes
    return _collisions(deployments(nodes, models, None))


def _ports(d: Deployment) -> list[tuple[str, int]]:
    ports = [("port", d.engine.port), ("distPort", d.engine.dist_port)]
    return ports + ([("ray", RAY_PORT)] if d.engine.executor == "ray" else [])


def _collisions(found: list[Deployment]) -> list[KeyedError]:
    """Ports and container names two deployments would both take on a node they share."""
    mistakes: list[KeyedError] = []
    taken = {port for d in found for _, port in _ports(d)}
    for i, d in enumerate(found):
        for earlier in found[:i]:
            shared = [n for n in d.nodes if n in earlier.nodes]
            if not shared:
                continue
            on = f"on {', '.join(shared)}"
            theirs = {port: key for key, port in _ports(earlier)}
            for key, port in _ports(d):
                if port not in theirs:
                    continue
                if key == "ray" and theirs[port] == "ray":
                    why = (
                        f"executor ray here and in {earlier.config_key} {on}: both would run Ray's head on {RAY_PORT};"
                        " one Ray group per node: run one of them native"
                    )
                    mistakes.append(KeyedError(why, (i, "engine", "executor"), "native"))
                    continue
                what = "Ray's head port (executor ray)" if theirs[port] == "ray" else f"engine.{theirs[port]}"
                where = (i, "engine", key) if key != "ray" else (i, "engine", "executor")
                why = f"{port} is also {earlier.config_key}'s {what} {on}: each model needs ports of its own"
                mistakes.append(KeyedError(why, where, _free(taken, port) if key != "ray" else "native"))
            if d.container == earlier.container:
                why = (
                    f"{d.container} is also {earlier.config_key}'s engine container {on}"
                    " (a name's letters other than a-z and 0-9 become '-'): name one container"
                )
                mistakes.append(KeyedError(why, (i, "engine", "containerName"), f"{SINGLE_CONTAINER}-{i}"))
    return mistakes


def _free(taken: set[int], port: int) -> int:
    """The first port above `port` that no model takes (below it when none is left above)."""
    return next((p for p in range(port + 1, 65536) if p not in taken), None) or next(
        p for p in range(port - 1, 0, -1) if p not in taken
    )


def single_form_given(raw: dict[str, Any]) -> list[str]:
    """The single form's keys that `raw` sets (spark-llm:engine at Pulumi.yaml's default counts as unset)."""
    given = [key for key in ("model", "image") if raw.get(key) not in (None, {})]
    if raw.get("engine") not in (None, {}, Engine().model_dump(by_alias=True)):
        given.append("engine")
    return given
