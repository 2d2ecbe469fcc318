"""Pure: the memory admission's steps: the spec the admission step reads on stdin (one writer, one reader), the token
that makes it run whenever `pulumi up` stops the group, the weights' size it counts, and the opt-in page cache drop
each node runs just before its engine starts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from spark_llm.group.memory import Admission, engine_memory, judge, parse
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import UNOBSERVED, record_token_script, repair_token
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.scripts import bash_lib
from spark_llm.plan.stdin_spec import spec_json, spec_object

# The admission's record on each node (spark_llm.plan.drift's tokens): the token of the last admission that passed.
ADMISSION_STEP = "memory-admission"
# The token of a node with no such record while nothing stops (a stack deployed before the record existed).
UNRECORDED = "unrecorded"


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
    weights_bytes: int | None
    """The weights' size from their source (`weights_size`); None: unknown, the files on the node count."""
    token: str
    """This run's admission token (`admission_token`), recorded on the node once it passes."""
    remote_dir: str
    """Where the node keeps its tokens."""


def admission_spec(
    plan: DeploymentPlan, node: NodePlan, token: str = UNOBSERVED, weights_bytes: int | None = None
) -> AdmissionSpec:
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
        "weights_bytes": weights_bytes,
        "token": token,
        "remote_dir": node.remote_dir,
    }


def admission_token(observation: NodeObservation | None, restart: str | None) -> str:
    """The token in a node's admission step's triggers: new at every program run while `up` stops the group.

    `restart`: why this `up` stops the group (spark_llm.plan.drift.restart_pending), None when nothing stops. The
    step's other triggers are the stop steps', but a step that passed is recorded even when the `up` failed after
    it, before the group stopped: the next `up` would stop the group without judging that node again. While the
    group is to stop, the token is new at every run, so every member is judged in the run that stops it; once
    nothing stops, it is the token the node recorded with its last admission that passed, so a no-op `up` runs
    nothing.
    """
    if observation is None:
        return UNOBSERVED
    if restart is not None:
        return repair_token(f"admission: {restart}", observation.run)
    recorded = observation.tokens.get(ADMISSION_STEP, "").partition(" ")[0]
    return recorded or UNRECORDED


def record_script(spec: AdmissionSpec) -> str:
    """Bash the admission step runs on the node once it passed: records the token it passed with."""
    return record_token_script(spec["remote_dir"], ADMISSION_STEP, spec["token"], "passed")


def spec_text(spec: AdmissionSpec) -> str:
    return spec_json(spec)


def parse_spec(text: str) -> AdmissionSpec:
    return spec_object(text, "the memory admission")  # type: ignore[return-value]


def judge_spec(spec: AdmissionSpec, sections: Mapping[str, str]) -> Admission:
    """Pure: the verdict on the spec's node from its probe sections, the weights counted from their source where
    it is known (`weights_bytes`), else from the node's files."""
    return judge(
        parse(spec["node"], sections),
        engine_memory(spec["engine"], spec["version"], spec["flags"]),
        ranks=spec["ranks"],
        own_container=spec["container"],
        drop_caches=spec["drop_caches"],
        weights_bytes=spec.get("weights_bytes"),
    )


# spark-llm:memory.dropCaches: the step each node runs just before its engine starts (scripts/lib/drop_caches.sh).
DROP_CACHES_SCRIPT = bash_lib("drop_caches") + "drop_caches\n"
