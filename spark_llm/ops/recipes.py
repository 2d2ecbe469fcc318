"""`spark-llm recipes`: the known-good configurations in recipes/, each with its fit on 2 and 4 Sparks on paper.

The fit is the start's own memory admission for one rank on empty GB10s (MemTotal 121.7 GiB), from the recipe's
weights size and its engine's memory flag; no stack or node is read.
"""

from __future__ import annotations

import argparse
import json
import sys

from spark_llm.config import recipe
from spark_llm.ops.pulumi_cli import PulumiCli

# Needs no stack: the recipes are read from the checkout.
USES_PLAN = False
NODE_COUNTS = (2, 4)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # --json is common to every command


def rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for r in recipe.load_all():
        out.append(
            {
                "name": r.name,
                "model": r.model.name,
                "profile": r.profile,
                "engine": f"{r.engine.kind} {r.engine.version}",
                "image": r.image,
                "nodeCounts": r.node_counts,
                "fit": {str(n): recipe.fit(r, n).verdict for n in NODE_COUNTS},
                "source": r.source,
            }
        )
    return out


def run(pulumi: PulumiCli, plan: object, args: argparse.Namespace) -> int:
    del pulumi, plan
    try:
        found = rows()
    except recipe.RecipeError as err:
        sys.stderr.write(f"spark-llm recipes: {err}\n")
        return 2
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    for row in found:
        fit = ", ".join(f"{n} Sparks: {v}" for n, v in row["fit"].items())  # type: ignore[attr-defined]
        print(f"{row['name']}  {row['model']}  {row['profile']} ({row['engine']})  {fit}\n    source: {row['source']}")
    return 0


def readme_table() -> str:
    """The README's recipes table (tests/unit/ops/test_recipes_cli.py keeps the README equal to it)."""
    lines = [
        "| recipe | model | profile | engine | fits 2 Sparks | fits 4 Sparks | source |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows():
        fit = row["fit"]
        assert isinstance(fit, dict)
        lines.append(
            f"| `{row['name']}` | {row['model']} | {row['profile']} | {row['engine']} | {fit['2']} | {fit['4']} "
            f"| {row['source']} |"
        )
    return "\n".join(lines)
