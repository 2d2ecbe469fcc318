"""The supervisor under Pulumi mocks (Pulumi.dual-spark.yaml turns it on): a container on the head that survives
the head's reboot, created after the group served, stopped before `pulumi up` stops any member."""

from __future__ import annotations

import json
import shlex

import pulumi

from tests.unit import graph_mocks
from tests.unit.graph_mocks import (
    SUPERVISOR_PUBLIC_KEY,
    dual_spark_stack_file,
    inputs,
    label,
    pinned,
    register,
    without_secrets,
)

SUPERVISOR = "spark-supervisor"


def _depends_on(request, name: str) -> bool:
    return any(dep.endswith(f"::{name}") for dep in request.dependencies)


def test_the_supervisor_is_a_container_on_the_head_that_comes_back_after_a_reboot(registered):
    container = registered[SUPERVISOR]
    assert container.type == "docker:index/container:Container"
    assert "::spark-docker-spark-1::" in container.provider
    got = inputs(container)
    assert got["name"] == "spark-llm-supervisor"
    assert got["restart"] == "unless-stopped" and got["networkMode"] == "host"
    volumes = {v["containerPath"]: v for v in got["volumes"]}
    assert volumes["/var/run/docker.sock"]["hostPath"] == "/var/run/docker.sock"
    # Its own key's dir, read-only; the head's fabric key (~/.ssh) is not mounted.
    assert volumes["/spark-llm-supervisor-key"]["hostPath"] == "/home/aurora/spark-llm/supervisor-key"
    assert volumes["/spark-llm-supervisor-key"]["readOnly"] is True
    assert not any(".ssh" in v["hostPath"] for v in volumes.values())
    assert container.deleteBeforeReplace


def test_its_own_key_is_made_on_the_head_per_state_and_removed_with_it(registered):
    key = registered["spark-supervisor-key"]
    assert key.type == "command:remote:Command"
    got = inputs(key)
    assert got["connection"]["value"]["host"] == "10.1.230.180"  # the head (the connection is a secret)
    call = shlex.split(got["stdin"].splitlines()[-1])
    assert call == ["supervisor_key_make", "/home/aurora/spark-llm/supervisor-key", "spark-llm-supervisor@dual-spark"]
    assert "PRIVATE KEY" not in json.dumps(without_secrets(got))
    assert got["delete"].endswith("rm -rf /home/aurora/spark-llm/supervisor-key")
    assert got["update"].endswith("cat /home/aurora/spark-llm/supervisor-key/id_ed25519.pub")
    # This state's id (components.state_identity) is a trigger: a new state makes a key of its own.
    assert _depends_on(key, "spark-state")
    assert key.deleteBeforeReplace


def test_each_worker_allows_the_key_only_its_forced_command_and_removes_that_line_at_delete(registered):
    step = registered["spark-supervisor-authorize-spark-2"]
    got = inputs(step)
    connection = got["connection"]["value"]
    assert connection["host"] == "192.168.200.13" and connection["proxy"]["host"] == "10.1.230.180"
    line = 'restrict,command="/home/aurora/spark-llm/supervisor-allow.sh spark-llm-engine" ' + SUPERVISOR_PUBLIC_KEY
    assert shlex.join(["supervisor_key_allow", line]) in got["stdin"]
    assert "SPARK_LLM_PHASE=delete " in got["delete"]
    assert step.deleteBeforeReplace
    assert _depends_on(step, "spark-supervisor-key")
    assert "spark-supervisor-authorize-spark-1" not in registered  # the head's engine is read through its socket
    assert _depends_on(registered[SUPERVISOR], "spark-supervisor-authorize-spark-2")


def test_it_starts_after_the_readiness_gate_and_its_files(registered):
    assert _depends_on(registered[SUPERVISOR], "spark-engine-ready")
    assert _depends_on(registered[SUPERVISOR], "spark-supervisor-files")
    assert _depends_on(registered["spark-supervisor-files"], "spark-engine-ready")
    assert _depends_on(registered[SUPERVISOR], "spark-supervisor-state")


def test_its_state_outlives_a_new_group_and_goes_with_the_supervisor(registered):
    state = registered["spark-supervisor-state"]
    assert "rm -rf /home/aurora/spark-llm/supervisor-state" in inputs(state)["delete"]
    assert "supervisor-state" not in inputs(registered["spark-supervisor-files"])["delete"]


def test_it_is_stopped_before_any_member_with_the_members_restart_inputs_as_triggers(registered):
    stop = registered["spark-engine-stop-supervisor"]
    assert "docker stop -t 10 spark-llm-supervisor" in inputs(stop)["stdin"]
    assert _depends_on(registered["spark-engine-stop-spark-1"], "spark-engine-stop-supervisor")
    # The same triggers as the members' stop steps (besides each step's own script digest).
    assert json.dumps(inputs(stop)["triggers"][1:]) == json.dumps(
        inputs(registered["spark-engine-stop-spark-1"])["triggers"][1:]
    )


def test_it_is_on_by_default_and_off_only_when_the_stack_says_so(monkeypatch, registered):
    raw = pinned(dual_spark_stack_file())
    raw.pop("supervisor")
    default = register(monkeypatch, raw)
    assert inputs(default["spark-supervisor"])["name"] == "spark-llm-supervisor"
    assert sorted(name for name in default if "supervisor" in name) == sorted(
        name for name in registered if "supervisor" in name
    )


def test_without_it_nothing_of_it_is_declared_and_the_members_stop_steps_are_the_same(monkeypatch, registered):
    raw = pinned(dual_spark_stack_file())
    raw["supervisor"] = {"enabled": False}
    off = register(monkeypatch, raw)
    assert not [name for name in off if "supervisor" in name]
    for node in ("spark-1", "spark-2"):
        step = f"spark-engine-stop-{node}"
        assert inputs(off[step])["stdin"] == inputs(registered[step])["stdin"]


def test_its_image_is_checked_on_the_head_before_anything_is_stopped(registered):
    check = registered["spark-supervisor-image-check"]
    assert check.type == "command:remote:Command"
    got = inputs(check)
    assert "supervisor_image_check() {" in got["stdin"]
    # The engine image (its ID on the head, as the container runs it), named to the operator by its ref; the
    # group has a worker, so the image needs ssh too.
    call = shlex.split(got["stdin"].splitlines()[-1])
    ref = dual_spark_stack_file()["image"]["ref"]
    assert call[0] == "supervisor_image_check" and call[2:] == ["1", f"{ref} (the engine image)"], call
    for step in ("spark-engine-stop-supervisor", "spark-engine-stop-spark-1", "spark-engine-stop-spark-2"):
        assert _depends_on(registered[step], "spark-supervisor-image-check"), step
    assert _depends_on(registered[SUPERVISOR], "spark-supervisor-image-check")


def test_a_supervisor_image_of_its_own_is_pulled_and_that_image_is_checked(monkeypatch):
    raw = pinned(dual_spark_stack_file())
    raw["supervisor"]["image"] = "registry.example/engine-with-ssh:1"
    got = register(monkeypatch, raw)
    assert inputs(got["spark-supervisor-image"])["name"] == "registry.example/engine-with-ssh:1"
    last = inputs(got["spark-supervisor-image-check"])["stdin"].splitlines()[-1]
    assert "'registry.example/engine-with-ssh:1 (spark-llm:supervisor.image)'" in last


def test_a_head_alone_gets_no_key_and_no_worker_step(monkeypatch):
    raw = pinned(dual_spark_stack_file())
    raw["nodes"] = raw["nodes"][:1]
    got = register(monkeypatch, raw)
    assert "spark-supervisor-key" not in got and not [n for n in got if "-authorize-" in n]
    volumes = {v["containerPath"] for v in inputs(got[SUPERVISOR])["volumes"]}
    assert "/spark-llm-supervisor-key" not in volumes


def test_a_new_key_replaces_the_container_which_mounts_its_dir(monkeypatch, registered):
    raw = pinned(dual_spark_stack_file())
    monkeypatch.setattr(graph_mocks, "SUPERVISOR_PUBLIC_KEY", SUPERVISOR_PUBLIC_KEY.replace("Fake", "Next"))
    rotated = register(monkeypatch, raw)
    assert label(rotated[SUPERVISOR], "spark-llm.supervises") != label(registered[SUPERVISOR], "spark-llm.supervises")
    assert inputs(rotated["spark-supervisor-files"])["stdin"] == inputs(registered["spark-supervisor-files"])["stdin"]


def test_a_key_line_removed_on_a_worker_is_drift_that_up_puts_back(monkeypatch):
    """The line taken off a worker's authorized_keys (by hand, or a tool that rewrites the file) used to leave the
    supervisor waiting for that worker forever; preview names it and `up` writes it again."""
    from spark_llm.plan.observation import NodeObservation

    def authorize_triggers(live: str, warnings: list[str]) -> list:
        observations = {
            "spark-1": NodeObservation(node="spark-1"),
            "spark-2": NodeObservation(
                node="spark-2", tokens={"supervisor-key": "tok-key abc"}, facts={"supervisor_key": live}
            ),
        }
        monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warnings.append(msg))
        got = register(monkeypatch, pinned(dual_spark_stack_file()), observations=observations)
        return inputs(got["spark-supervisor-authorize-spark-2"])["triggers"]

    kept: list[str] = []
    assert "tok-key" in authorize_triggers("abc", kept)
    assert not [w for w in kept if "supervisor's key" in w]
    warned: list[str] = []
    repair = [t for t in authorize_triggers("def", warned) if str(t).startswith("repair-")]
    assert len(repair) == 1
    assert [w for w in warned if w.startswith("drift: the supervisor's key on spark-2")], warned
