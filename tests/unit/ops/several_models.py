"""A stack of two models for the operator CLI's tests: the dual-spark stack's model across both nodes and a small
`embed` on the head alone (spark-llm:models), parsed and planned as the program plans it."""

from __future__ import annotations

from spark_llm.config import parse
from spark_llm.plan.deployment import LAUNCH_TEMPLATE
from spark_llm.plan.stack import StackPlan, build_stack

BIG = "Qwen/Qwen3.5-122B-A10B-FP8"
SMALL = "embed"


def two_models_raw(raw: dict) -> dict:
    """`raw` (the dual-spark stack file's config) with its model and a small one on the head as spark-llm:models."""
    engine = {"flags": ["--mem-fraction-static", "0.6"]}
    big = {**raw["model"], "image": raw["image"], "engine": engine}
    small = {
        "name": SMALL,
        "path": "/home/aurora/models/embed",
        "image": raw["image"],
        "engine": {"port": 30001, "distPort": 20001, "flags": ["--mem-fraction-static", "0.2"]},
        "nodes": ["spark-1"],
    }
    return {k: v for k, v in raw.items() if k not in ("model", "image", "engine")} | {"models": [big, small]}


def two_models(raw: dict) -> StackPlan:
    return build_stack(parse(two_models_raw(raw)), LAUNCH_TEMPLATE.read_text())
