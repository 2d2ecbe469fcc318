"""Pure: the memory admission's steps: the spec the admission step reads on stdin (one writer, one reader) and the
opt-in page cache drop each node runs just before its engine starts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from spark_llm.group.memory import Admission, engine_memory, judge, parse
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.scripts import bash_lib
from spark_llm.plan.stdin_spec import spec_json, spec_object


class AdmissionSpec(TypedDict):
    """What the admission step (spark_llm.ops.admission) reads on stdin: one node and how to judge it."""

    node: str
    connection: dict
    """How this machine reaches it (spark_llm.plan.hosts.SshHost.to_props)."""
    model_path: str
    engine: str
    version: str
    flags: list[str]
    container: str
    ranks: int
    drop_caches: bool


def admission_spec(plan: DeploymentPlan, node: NodePlan) -> AdmissionSpec:
    cfg = plan.config
    return {
        "node": node.name,
        "connection": node.ssh.to_props(),
        "model_path": plan.model_path,
        "engine": plan.engine,
        "version": plan.engine_version,
        "flags": list(cfg.engine.flags),
        "container": plan.container,
        # One GPU a node: the weights split over every node's rank (tensor x pipeline parallel).
        "ranks": len(plan.nodes),
        "drop_caches": plan.drop_caches,
    }


def spec_text(spec: AdmissionSpec) -> str:
    return spec_json(spec)


def parse_spec(text: str) -> AdmissionSpec:
    return spec_object(text, "the memory admission")  # type: ignore[return-value]


def judge_spec(spec: AdmissionSpec, sections: Mapping[str, str], weights_bytes: int | None = None) -> Admission:
    """Pure: the verdict on the spec's node from its probe sections (`weights_bytes`: see `judge`)."""
    return judge(
        parse(spec["node"], sections),
        engine_memory(spec["engine"], spec["version"], spec["flags"]),
        ranks=spec["ranks"],
        own_container=spec["container"],
        drop_caches=spec["drop_caches"],
        weights_bytes=weights_bytes,
    )


# spark-llm:memory.dropCaches: the step each node runs just before its engine starts (scripts/lib/drop_caches.sh).
DROP_CACHES_SCRIPT = bash_lib("drop_caches") + "drop_caches\n"
