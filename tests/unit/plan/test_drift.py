"""What the nodes run now -> what Pulumi must restart: the group's generation and the steps' tokens."""

from __future__ import annotations

import pytest

from spark_llm.config.group import groups
from spark_llm.plan.drift import (
    OWNER_STEP,
    REPAIR_PREFIX,
    UNOBSERVED,
    engines_of_other_states,
    foreign_containers,
    group_generation,
    step_token,
)
from spark_llm.plan.observation import EngineState, NodeObservation, parse_probe
from spark_llm.plan.stack import StackPlan

GEN = "repair-0123456789ab"
MEMBERS = [("head", "head"), ("w1", "worker"), ("w2", "worker")]


def running(started: str, generation: str = GEN) -> EngineState:
    labels = {"spark-llm.generation": generation, "spark-llm.node": "x"}
    return EngineState("running", 0, "id", f"2026-12-01T10:00:{started}Z", labels)


def group(**engines: EngineState) -> dict[str, NodeObservation]:
    base = {"head": running("09"), "w1": running("01"), "w2": running("02")}
    base.update(engines)
    return {n: NodeObservation(node=n, engine=e) for n, e in base.items()}


def test_a_broken_group_gets_the_same_generation_for_the_same_facts_in_one_run():
    # One program run declares the generation once per container: the same facts must give the same value.
    # (Which facts break the group: the one table, tests/unit/group/test_verdict.py.)
    change = {"w1": EngineState("exited", 137)}
    generation, why = group_generation(group(**change), MEMBERS)
    assert generation.startswith(REPAIR_PREFIX) and generation != GEN and why
    assert group_generation(group(**change), MEMBERS)[0] == generation


def test_without_observations_nothing_is_judged():
    assert group_generation(None, MEMBERS) == (UNOBSERVED, None)


def test_a_container_started_by_hand_is_foreign_but_ours_and_absent_ones_are_not():
    observations = group(w1=EngineState("running", labels={"maintainer": "someone"}), w2=EngineState("absent"))
    assert foreign_containers(observations) == ["w1"]


@pytest.mark.parametrize(
    ("recorded", "live", "keep"),
    [
        ("tok sha256:aa", "sha256:aa", True),
        ("tok sha256:aa", "sha256:bb", False),
        ("tok sha256:aa", None, False),
        ("", "sha256:aa", False),
    ],
    ids=["intact", "changed", "gone", "never-recorded"],
)
def test_a_step_token_stays_while_the_node_has_what_the_step_recorded(recorded, live, keep):
    tokens = {"image": recorded} if recorded else {}
    token, why = step_token(NodeObservation(node="w1", tokens=tokens), "image", live)
    assert (token == "tok") is keep and (why is None) is keep
    if not keep:
        assert token.startswith(REPAIR_PREFIX) and "w1" in (why or "")


def test_the_probe_output_is_parsed_into_an_observation():
    out = (
        'engine\t{"status": "running", "exit_code": 0, "container_id": "abc", "started_at": "2026-12-01T10:00:01Z",'
        ' "labels": {"spark-llm.generation": "g1"}}\n'
        "image\tsha256:aa linux/arm64\n"
        "token\timage tok sha256:aa\n"
        "weights\t0123abcd\n"
    )
    seen = parse_probe("w1", out)
    assert seen.engine.running and seen.engine.labels["spark-llm.generation"] == "g1"
    assert seen.image == "sha256:aa linux/arm64" and seen.tokens == {"image": "tok sha256:aa"}
    assert seen.facts == {"weights": "0123abcd"}
    assert parse_probe("w1", 'engine\t{"status": "absent"}\n').engine.status == "absent"


def test_an_unreadable_node_is_named_once_with_its_config_key_and_its_workers_through_it(monkeypatch, raw_config):
    import pulumi

    from components import bootstrap as stack
    from spark_llm.config import parse
    from spark_llm.plan import deployment as plan
    from spark_llm.remote import observe

    p = plan.build_plan(groups(parse(raw_config))[0], plan.LAUNCH_TEMPLATE.read_text())
    seen = {
        "spark-1": NodeObservation(node="spark-1", error="head (aurora@10.1.230.180): exit 255: ... No route to host"),
        "spark-2": NodeObservation(node="spark-2", error="spark-2 (...): exit 255: ... closed by remote host"),
    }
    warnings: list[str] = []
    monkeypatch.setattr(stack, "under_mocks", lambda: False)
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: True)
    monkeypatch.setattr(observe, "observe_stack", lambda groups: [seen])
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warnings.append(msg))
    assert stack.observe_nodes(StackPlan.one(p), [lambda _: ""]) == [seen]
    assert len(warnings) == 2
    assert "No route to host" in warnings[0] and "spark-llm:nodes[0].host and .hostKey" in warnings[0]
    assert warnings[1] == "spark-2 cannot be read now: it is reached through spark-1, which cannot be read."


def test_a_stopped_docker_engine_is_a_fault_of_that_node_not_a_missing_container():
    seen = parse_probe("w1", "docker\tCannot connect to the Docker daemon. Is the docker daemon running?\n")
    assert seen.docker_down and seen.error == (
        "its Docker engine does not answer: Cannot connect to the Docker daemon. Is the docker daemon running?"
    )


def run_probe_with_fake_docker(tmp_path, raw_config, docker_script: str) -> str:
    """A worker's probe script run by bash, with `docker` on PATH being `docker_script` (sh); its stdout."""
    import subprocess

    from spark_llm.config import parse
    from spark_llm.plan import deployment as plan
    from spark_llm.plan.observation import probe_script

    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\n" + docker_script)
    fake.chmod(0o755)
    p = plan.build_plan(groups(parse(raw_config))[0], plan.LAUNCH_TEMPLATE.read_text())
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + probe_script(p, p.workers[0])],
        capture_output=True,
        text=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        check=True,
    ).stdout


def test_the_probe_says_docker_does_not_answer_and_reads_nothing_else(tmp_path, raw_config):
    fake = "echo 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n"
    out = run_probe_with_fake_docker(tmp_path, raw_config, fake)
    assert out == "docker\tCannot connect to the Docker daemon at unix:///var/run/docker.sock.\n"


@pytest.mark.parametrize("present", [True, False])
def test_the_probe_asks_docker_once_about_a_container_it_finds(tmp_path, raw_config, present):
    """The probe runs at every preview and up, on every node: a running container is read with one docker call
    (inspect); only a failed inspect asks whether the Docker engine answers at all (absent, not down)."""
    inspect = 'echo \'{"status": "running", "exit_code": 0}\'; exit 0' if present else "echo; exit 1"
    fake = (
        f'echo "$1" >>{tmp_path}/calls\ncase "$1" in inspect) {inspect} ;; version) exit 0 ;; image) exit 1 ;; esac\n'
    )
    out = run_probe_with_fake_docker(tmp_path, raw_config, fake)
    calls = (tmp_path / "calls").read_text().split()
    seen = parse_probe("w1", out)
    if present:
        assert calls == ["inspect", "image"] and seen.engine.status == "running"
    else:
        assert calls == ["inspect", "version", "image"] and seen.engine.status == "absent" and not seen.docker_down


def test_up_stops_before_anything_runs_when_a_node_cannot_be_read(monkeypatch, raw_config):
    import pulumi

    from components import bootstrap as stack
    from spark_llm.config import parse
    from spark_llm.plan import deployment as plan
    from spark_llm.remote import observe

    p = plan.build_plan(groups(parse(raw_config))[0], plan.LAUNCH_TEMPLATE.read_text())
    docker_down = NodeObservation(node="spark-2", error="its Docker engine does not answer: ...", docker_down=True)
    seen = {"spark-1": NodeObservation(node="spark-1"), "spark-2": docker_down}
    monkeypatch.setattr(stack, "under_mocks", lambda: False)
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    monkeypatch.setattr(observe, "observe_stack", lambda groups: [seen])
    with pytest.raises(stack.Refusal) as raised:
        stack.observe_nodes(StackPlan.one(p), [lambda _: ""])
    message = str(raised.value)
    assert message.startswith("spark-2 cannot be read now: its Docker engine does not answer")
    assert "sudo systemctl start docker" in message and "Nothing was run on any node" in message


def absent_everywhere(run: str) -> dict[str, NodeObservation]:
    return {n: NodeObservation(node=n, run=run) for n, _ in MEMBERS}


def test_a_group_gone_again_gets_a_generation_its_first_deployment_never_had():
    # Regression: state B deployed to empty nodes; state A took the nodes over, then destroyed everything. B's
    # preview saw the very facts of its first deployment ("no engine container anywhere"), computed the very same
    # generation, and called a cluster that runs nothing "unchanged".
    first, again = (
        group_generation(absent_everywhere("run-1"), MEMBERS),
        group_generation(absent_everywhere("run-2"), MEMBERS),
    )
    assert first[0] != again[0] and again[1] is not None


def test_a_step_whose_record_is_gone_again_gets_a_new_token():
    # The same regression for a step: its record (and the file) deleted by another state's destroy.
    first = step_token(NodeObservation(node="w1", run="run-1"), "image", None)
    again = step_token(NodeObservation(node="w1", run="run-2"), "image", None)
    assert first[0] != again[0] and again[0].startswith(REPAIR_PREFIX)


def owned(state: str, container: str = "id") -> NodeObservation:
    return NodeObservation(node="w1", engine=running("01"), tokens={OWNER_STEP: f"{state} {container}"})


@pytest.mark.parametrize(
    ("observation", "state_id", "other"),
    [
        (owned("mine"), "mine", False),
        (owned("theirs"), "mine", True),
        (owned("theirs", container="an-older-container"), "mine", False),  # the record is of another container
        (NodeObservation(node="w1", engine=running("01")), "mine", False),  # no record: before owners were kept
        (NodeObservation(node="w1", engine=running("01")), None, True),  # this state never deployed
        (owned("theirs"), None, True),
        (
            NodeObservation(node="w1", engine=EngineState("exited", 1, "id", labels={"spark-llm.generation": GEN})),
            None,
            False,
        ),
        (NodeObservation(node="w1", engine=EngineState("running", labels={"maintainer": "x"})), None, False),
    ],
    ids=[
        "mine",
        "another-state",
        "stale-record",
        "no-record",
        "fresh-state",
        "fresh-state-recorded",
        "exited",
        "by-hand",
    ],
)
def test_engines_another_state_started_are_told_from_this_states(observation, state_id, other):
    assert engines_of_other_states({"w1": observation}, state_id) == (["w1"] if other else [])


def test_a_state_older_than_the_nodes_is_named_only_when_every_node_runs_this_revision_elsewhere():
    """Issue 31, 10: the nodes run this config's revision in containers the state does not record (an older state
    imported); any other mismatch is another rule's (drift, another state's engines) or none."""
    from spark_llm.plan.drift import state_behind_nodes

    def at(cid: str, revision: str = "rev") -> EngineState:
        return EngineState("running", 0, cid, "2026-12-01T10:00:00Z", {"spark-llm.group-revision": revision})

    newer = {n: NodeObservation(node=n, engine=at(f"new-{n}")) for n in ("head", "w1")}
    recorded = {"head": "old-head", "w1": "old-w1"}
    said = state_behind_nodes(newer, recorded, "rev")
    assert said is not None and said.startswith("every node already runs revision rev (this config's)")
    assert "(head old-head, w1 old-w1)" in said and "`pulumi stack import`" in said
    assert state_behind_nodes(newer, {"head": "new-head", "w1": "old-w1"}, "rev") is None  # the state records one
    assert state_behind_nodes(newer, recorded, "other") is None  # the config asks for another revision: drift
    assert state_behind_nodes(newer, recorded, "rev", others=["w1"]) is None  # another state's engines
    assert state_behind_nodes(newer, None, "rev") is None  # a stack with no outputs yet
