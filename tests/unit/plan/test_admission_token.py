"""Issue 41, 3: the memory admission is never skipped by an `up` that stops the group, and it counts the weights
by their source's manifest before they are on the node.

Regression: after an `up` that failed part way (worker-1 refused, the head's admission passed and was recorded),
the next `up` stopped the group and restarted it into a head the preview had just called `refused`, exit 0: the
head's admission step had the same triggers as recorded, so pulumi-command did not run it. And a memory flag too
small for the weights (`--gpu-memory-utilization 0.05`) previewed clean on nodes without the weights yet.
"""

from __future__ import annotations

import pytest

from spark_llm.group.memory import GIB, REFUSED
from spark_llm.plan import memory
from spark_llm.plan.container import LABEL_GENERATION, LABEL_REVISION
from spark_llm.plan.drift import UNOBSERVED, restart_pending
from spark_llm.plan.observation import EngineState, NodeObservation
from tests.unit.ops.node_facts import build
from tests.unit.plan.test_memory import facts, gb10_idle

MEMBERS = ["head", "worker-1"]
PLANNED = {LABEL_GENERATION: "g1", LABEL_REVISION: "r2", "spark-llm.script": "s1"}
IMAGE = "sha256:" + "a" * 64


def node(name: str, labels: dict[str, str], run: str, token: str = "", status: str = "running") -> NodeObservation:
    tokens = {memory.ADMISSION_STEP: f"{token} passed"} if token else {}
    engine = EngineState(status, container_id="c-" + name, labels=labels, image_id=IMAGE)
    return NodeObservation(node=name, engine=engine, tokens=tokens, run=run)


def group(labels: dict[str, str], run: str, token: str = "") -> dict[str, NodeObservation]:
    return {name: node(name, labels, run, token) for name in MEMBERS}


def tokens(observations: dict[str, NodeObservation]) -> dict[str, str]:
    restart = restart_pending(observations, MEMBERS, PLANNED, IMAGE)
    return {name: memory.admission_token(observations[name], restart) for name in MEMBERS}


def test_after_an_up_that_failed_before_the_group_stopped_the_next_up_judges_every_member_again():
    # The old group (revision r1) still runs; the failed run's head passed and recorded its token.
    old = {**PLANNED, LABEL_REVISION: "r1"}
    failed = tokens(group(old, run="run-1"))
    again = tokens(group(old, run="run-2", token=failed["head"]))
    assert all(again[n] != failed[n] for n in MEMBERS)  # new triggers: pulumi-command runs every admission step


def test_a_no_op_up_after_the_restart_runs_no_admission():
    # The restart's token, recorded by every member's admission; the group now runs what the plan says.
    restarted = tokens(group({**PLANNED, LABEL_REVISION: "r1"}, run="run-1"))["head"]
    assert tokens(group(PLANNED, run="run-2", token=restarted)) == {n: restarted for n in MEMBERS}
    assert tokens(group(PLANNED, run="run-3", token=restarted)) == {n: restarted for n in MEMBERS}


def test_a_stack_deployed_before_the_record_gets_one_stable_token():
    assert set(tokens(group(PLANNED, run="run-1")).values()) == {memory.steps.UNRECORDED}
    assert tokens(group(PLANNED, run="run-1")) == tokens(group(PLANNED, run="run-2"))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda o: o.__setitem__("worker-1", node("worker-1", PLANNED, "r", status="exited")), "is exited"),
        (lambda o: o.__setitem__("head", node("head", {**PLANNED, "spark-llm.script": "s0"}, "r")), "spark-llm.script"),
        (lambda o: o.__setitem__("head", NodeObservation(node="head", error="ssh: timeout", run="r")), "not be read"),
    ],
)
def test_the_group_stops_when_a_member_lacks_a_restart_input(change, why):
    observations = group(PLANNED, run="r")
    assert restart_pending(observations, MEMBERS, PLANNED, IMAGE) is None
    change(observations)
    assert why in (restart_pending(observations, MEMBERS, PLANNED, IMAGE) or "")


def test_another_image_stops_the_group():
    assert "another image" in (restart_pending(group(PLANNED, run="r"), MEMBERS, PLANNED, "sha256:" + "b" * 64) or "")


def test_unobserved_nodes_give_the_constant_token():
    assert memory.admission_token(None, None) == UNOBSERVED


def test_a_setting_too_small_for_the_weights_is_refused_before_they_are_on_the_node(raw_config):
    """A recipe stack at --gpu-memory-utilization 0.05 on a GB10: 6 GiB cannot hold a 60 GiB model's share."""
    spark_plan = build(raw_config)
    spec = memory.admission_spec(spark_plan, spark_plan.head, weights_bytes=60 * GIB)
    spec.update(engine="vllm", version="0.33.0", flags=["--gpu-memory-utilization", "0.05"])
    got = memory.judge_spec(spec, facts(gb10_idle()))  # no weights on the node yet
    assert got.verdict == REFUSED, got.line()
    assert "its weights share 30.0 GiB (1/2 of 60.0 GiB)" in got.detail
    assert "raise --gpu-memory-utilization" in got.fix
    # Unknown source size: the node's files count, as before (none here: not counted).
    unknown = memory.judge_spec({**spec, "weights_bytes": None}, facts(gb10_idle()))
    assert "not on the node yet" in unknown.detail
