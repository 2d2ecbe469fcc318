"""Placement (pure): do the stack's models fit together on each node they share, before anything stops?

Per node, each model's rank need, as the memory admission counts it (spark_llm.group.memory.rank_need: the engine's
memory setting, with the rank's share of the weights where the setting does not already hold them), summed against
the node's MemTotal: a GB10's as its /proc/meminfo says, or the one given. The sum must leave the admission's
margin (WARN_MARGIN) for the system: an engine's start gate judges free memory, and a node never has all of
MemTotal free. A node with one model is not judged here: the admission judges it at its start with the node's
own figures, as for a single-model stack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spark_llm.config.models import Deployment
from spark_llm.config.recipe import GB10_MEMTOTAL
from spark_llm.group.memory import WARN_MARGIN, EngineMemory, engine_memory, gib, lower_setting, rank_need, rank_weights


@dataclass(frozen=True)
class RankNeed:
    """What one model's rank takes of one node."""

    model: str
    config_key: str
    """Where the stack file declares the model (`spark-llm:models[1]`)."""
    setting: EngineMemory
    share: int
    """The rank's share of the weights (0 when their size is not known)."""
    need: int
    took: str
    """How `need` is made, in words (`--gpu-memory-utilization 0.1 x 121.7 GiB`)."""

    @property
    def budgeted(self) -> bool:
        """Whether the engine's setting bounds what it takes (SGLang without --mem-fraction-static takes the rest)."""
        return self.setting.fraction is not None or self.setting.kv_bytes is not None


@dataclass(frozen=True)
class NodeFit:
    """One node's verdict: its models' needs summed against its MemTotal."""

    node: str
    total: int
    needs: tuple[RankNeed, ...]
    fix: str = ""
    """Empty when it fits (or holds one model)."""

    @property
    def shared(self) -> bool:
        return len(self.needs) > 1

    @property
    def fits(self) -> bool:
        return not self.fix

    @property
    def used(self) -> int:
        return sum(n.need for n in self.needs)

    def line(self) -> str:
        if not self.shared:
            only = self.needs[0].model if self.needs else "no model"
            return f"{self.node}: {only} only: the memory admission judges it when it starts"
        parts = " + ".join(f"{n.model} {gib(n.need)}" for n in self.needs)
        said = f"{self.node}: {parts} = {gib(self.used)} of {gib(self.total)} MemTotal ({gib(WARN_MARGIN)} kept free)"
        if self.fits:
            return f"{said}: fits ({gib(self.total - self.used)} left)"
        return f"{said}: does not fit: {self.fix}"


@dataclass(frozen=True)
class Placement:
    """Every model's rank need and every node's verdict."""

    needs: tuple[tuple[str, tuple[tuple[str, RankNeed], ...]], ...]
    """Per model, its need on each of its nodes."""
    nodes: tuple[NodeFit, ...]

    @property
    def fits(self) -> bool:
        return all(n.fits for n in self.nodes)

    def lines(self) -> list[str]:
        """One line per model (its rank need, on which nodes), then one per node (the sum, and the verdict)."""
        out = []
        for model, on in self.needs:
            by_need: dict[tuple[int, str], list[str]] = {}
            for node, need in on:
                by_need.setdefault((need.need, need.took), []).append(node)
            said = "; ".join(f"{gib(n)} a rank on {', '.join(nodes)} ({took})" for (n, took), nodes in by_need.items())
            out.append(f"{model}: {said}")
        return out + [n.line() for n in self.nodes]


def place(
    found: Sequence[Deployment],
    memtotal: Mapping[str, int] | None = None,
    weights: Mapping[str, int] | None = None,
) -> Placement:
    """Pure: the deployments' rank needs summed per node.

    `memtotal`: bytes per node (default: a GB10's); `weights`: the weights' bytes per model name where known (a
    setting in fractions of MemTotal holds them already; otherwise an unknown size is counted as nothing).
    """
    totals = memtotal or {}
    sizes = weights or {}
    per_node: dict[str, list[RankNeed]] = {}
    per_model = []
    for d in found:
        setting = engine_memory(d.engine.kind, d.engine.version, d.engine.flags)
        share = rank_weights(sizes[d.name], len(d.nodes)) if d.name in sizes else 0
        on = []
        for node in d.nodes:
            need, took = rank_need(setting, share, totals.get(node, GB10_MEMTOTAL))
            if d.name not in sizes and not setting.fraction:
                took += "; the weights' size is not known yet: not counted"
            rank = RankNeed(d.name, d.config_key, setting, share, need, took)
            per_node.setdefault(node, []).append(rank)
            on.append((node, rank))
        per_model.append((d.name, tuple(on)))
    nodes = tuple(_judge(node, totals.get(node, GB10_MEMTOTAL), tuple(needs)) for node, needs in per_node.items())
    return Placement(tuple(per_model), nodes)


def _judge(node: str, total: int, needs: tuple[RankNeed, ...]) -> NodeFit:
    if len(needs) < 2:
        return NodeFit(node, total, needs)
    unbounded = [n for n in needs if not n.budgeted]
    if unbounded:
        fix = "; ".join(
            f"set {n.model}'s memory budget ({n.config_key}.engine.flags: --mem-fraction-static): without it SGLang"
            " sizes its KV cache from what is free when it starts and leaves nothing for the other models"
            for n in unbounded
        )
        return NodeFit(node, total, needs, fix)
    used = sum(n.need for n in needs)
    if used + WARN_MARGIN <= total:
        return NodeFit(node, total, needs)
    lowered = [lower_setting(n.setting, total - (used - n.need), n.share, total, whose=f"{n.model}'s ") for n in needs]
    fix = ", or ".join(text for text in reversed(lowered) if text)  # the model listed last first: the newcomer
    return NodeFit(node, total, needs, fix or f"run fewer models on {node} (their nodes in spark-llm:models)")
