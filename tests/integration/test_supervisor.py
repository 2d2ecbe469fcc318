"""The group's supervisor (spark-llm:supervisor) on the sim (1 head + 1 worker), with the real pulumi CLI.

User stories: a worker reboots (its node container restarted: engine exited, disk kept), then the head does; the
group serves again without anyone running a command, workers started before the head, within the start time plus
30 s, and the next `pulumi up` restarts nothing (the supervisor started the same containers again, in order). A
member that crashes on every start is restarted at most maxRestarts times, then the group is left stopped and
`spark-llm status` fails saying the supervisor gave up and why; once the cause is gone, `pulumi up` converges.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import SIM_IMAGE_TAG, Pulumi, SimCluster, assert_group_serves, complete, run
from tests.waits import wait_for

pytestmark = pytest.mark.integration

SUPERVISOR = "spark-llm-supervisor"
SUPERVISOR_STATE = "/root/spark-llm/supervisor-state/state.json"
# The worker's engine crashes at init while this file exists on its node (sim/engine/standin_engine/knobs.py:
# STANDIN_CRASH_WHILE_FILE; the container sees the node's cache dir as ~/.cache).
CRASH_FILE_IN_CONTAINER = "/root/.cache/standin-crash"
CRASH_FILE_ON_NODE = "/root/spark-llm/cache/standin-crash"
MAX_RESTARTS = 2
# What the done-criterion allows beyond the group's own start time, from the reboot to a served completion.
SLACK_S = 30


def supervisor_config(pulumi: Pulumi) -> None:
    pulumi.reset_config()
    pulumi.set("supervisor.enabled", "true")
    pulumi.set("supervisor.maxRestarts", str(MAX_RESTARTS))
    pulumi.set("supervisor.windowSeconds", "300")
    pulumi.set("supervisor.backoffSeconds", "2")
    pulumi.set("supervisor.pollSeconds", "1")
    pulumi.set("engine.env.STANDIN_CRASH_WHILE_FILE", CRASH_FILE_IN_CONTAINER)


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi, sim_cluster: SimCluster) -> Iterator[Pulumi]:
    supervisor_config(pulumi)
    pulumi.up()
    yield pulumi


def spark_llm_status(pulumi: Pulumi) -> tuple[int, dict]:
    config = ["--stack", "sim", "--config-file", str(pulumi.config_file)]
    result = run([sys.executable, "-m", "spark_llm.ops.cli", "status", *config, "--json"], env=pulumi.env, check=False)
    return result.returncode, json.loads(result.stdout)


def engine_ids(sim: SimCluster) -> dict[str, str]:
    return {
        n: sim.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", "spark-llm-engine").stdout.strip()
        for n in ("head", "worker-1")
    }


def serving_again(sim: SimCluster, outputs: dict, before: dict[str, str]) -> bool:
    """Both engines started anew (after `before`), the worker before the head, and a completion is served."""
    try:
        started = {n: sim.started_at(n) for n in before}
        if not all(started[n] > before[n] for n in before) or not started["worker-1"] < started["head"]:
            return False
        return complete(outputs)["usage"]["completion_tokens"] == 4
    except (AssertionError, OSError, ValueError):
        return False


def start_seconds(outputs: dict) -> float:
    """The group's start time, as the readiness gate measured it at `pulumi up` (the start_timeline output)."""
    return float(outputs["start_timeline"]["gate_seconds"])


def reboot_and_wait(sim: SimCluster, pulumi: Pulumi, node: str) -> float:
    """Restart the node's container (its engine exits, its disk and the supervisor's restart policy stay); the
    seconds until the group serves again, which nobody asked for."""
    outputs = pulumi.outputs()
    before = {n: sim.started_at(n) for n in ("head", "worker-1")}
    recorded = len(supervisor_restarts(sim))
    start = time.monotonic()
    run(["docker", "restart", "-t", "2", sim.container(node)])
    bound = start_seconds(outputs) + SLACK_S + 60  # the deadline of the wait; the assertion below is the criterion
    wait_for(f"the group to serve again after {node}'s reboot", lambda: serving_again(sim, outputs, before), bound, 1)
    # A completion can come before the supervisor's own /health poll records its restart as served: a reboot in
    # that gap (the next one, of the head) would cut its restart short. Wait for the record too.
    wait_for(f"the supervisor to record its restart after {node}'s reboot", lambda: restart_ended(sim, recorded), 60, 1)
    return time.monotonic() - start


def supervisor_restarts(sim: SimCluster) -> list[dict]:
    """The restarts in the supervisor's state file on the head ([] before its first)."""
    found = sim.node_exec("head", "cat", SUPERVISOR_STATE, check=False)
    try:
        return json.loads(found.stdout).get("restarts", []) if found.returncode == 0 else []
    except ValueError:  # read while being written
        return []


def restart_ended(sim: SimCluster, recorded: int) -> bool:
    restarts = supervisor_restarts(sim)
    return len(restarts) > recorded and "ended" in restarts[-1]


def test_a_rebooted_worker_then_head_serve_again_in_order_without_a_command_and_up_restarts_nothing(
    deployed, sim_cluster
):
    outputs = deployed.outputs()
    ids = engine_ids(sim_cluster)
    state = sim_cluster.node_exec("head", "docker", "inspect", "-f", "{{.State.Status}}", SUPERVISOR).stdout.strip()
    assert state == "running"
    allowed = start_seconds(outputs) + SLACK_S
    worker = reboot_and_wait(sim_cluster, deployed, "worker-1")
    print(f"supervisor-timing worker reboot -> serving: {worker:.1f} s (start {start_seconds(outputs):.1f} s)")
    assert worker <= allowed
    head = reboot_and_wait(sim_cluster, deployed, "head")
    print(f"supervisor-timing head reboot -> serving: {head:.1f} s")
    assert head <= allowed
    # The same containers, started again in order: nothing for Pulumi to do.
    assert engine_ids(sim_cluster) == ids
    assert_group_serves(deployed, sim_cluster)
    deployed("preview", "--expect-no-changes")
    up = deployed.up().stdout
    assert "replaced" not in up and "created" not in up, up
    assert engine_ids(sim_cluster) == ids
    code, status = spark_llm_status(deployed)
    assert code == 0 and status["state"] == "in sync", status
    restarts = status["supervisor"]["restarts"]
    assert [r["result"] for r in restarts] == ["served", "served"], restarts
    assert "worker-1's engine container is exited" in restarts[0]["reason"], restarts
    assert "head's engine container is exited" in restarts[1]["reason"], restarts


def test_a_member_crashing_on_every_start_is_left_stopped_after_the_budget_and_status_says_why(deployed, sim_cluster):
    # A new group (`spark-llm restart`: new containers through Pulumi, the supervisor stopped first, then a new one)
    # starts a new budget: the restarts of the test above no longer count.
    config = ["--stack", "sim", "--config-file", str(deployed.config_file)]
    restart = [sys.executable, "-m", "spark_llm.ops.cli", "restart", *config, "--yes", "--json"]
    report = json.loads(run(restart, env=deployed.env, timeout=600).stdout)
    assert report["ok"], report
    code, status = spark_llm_status(deployed)
    assert code == 0 and status["supervisor"]["restarts"] == [], status
    sim_cluster.node_exec("worker-1", "touch", CRASH_FILE_ON_NODE)
    try:
        sim_cluster.node_exec("worker-1", "docker", "kill", "spark-llm-engine")

        def gave_up() -> bool:
            """The supervisor's own record on the head says it gave up (read by `cat`: `spark-llm status`, which
            reads it too, costs ~2 s of CPU a call, the Pulumi CLI's included, and is asked once, below)."""
            record = sim_cluster.node_exec("head", "cat", SUPERVISOR_STATE, check=False).stdout
            try:
                return bool(json.loads(record).get("gave_up"))
            except ValueError:
                return False

        # Once a second, the supervisor's own poll (pollSeconds): a `docker exec` every 0.2 s would cost more CPU than
        # the status calls it replaces.
        wait_for("the supervisor to give up (its record on the head)", gave_up, 240, 1)
        code, status = spark_llm_status(deployed)
        assert code != 0 and status["state"] == "supervisor gave up", status
        reason = status["supervisor"]["gave_up"]["reason"]
        assert "worker-1" in reason and f"after {MAX_RESTARTS} restarts" in reason, reason
        assert "`pulumi up`" in status["summary"], status
        failed = [r for r in status["supervisor"]["restarts"] if r["result"].startswith("failed")]
        assert len(failed) == MAX_RESTARTS, status
        assert "STANDIN_CRASH_WHILE_FILE" in json.dumps(status["supervisor"]), status
        states = {
            n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.State.Status}}", "spark-llm-engine").stdout
            for n in ("head", "worker-1")
        }
        assert all(s.strip() == "exited" for s in states.values()), states
        preview = deployed("preview")
        assert "the supervisor gave up" in preview.stdout + preview.stderr
    finally:
        sim_cluster.node_exec("worker-1", "rm", "-f", CRASH_FILE_ON_NODE)
    deployed.up()
    assert_group_serves(deployed, sim_cluster)
    code, status = spark_llm_status(deployed)
    assert code == 0 and status["state"] == "in sync", status
    assert status["supervisor"]["gave_up"] is None and status["supervisor"]["restarts"] == [], status
    deployed("preview", "--expect-no-changes")  # the new group and its new supervisor: nothing left to do


def supervisor_state(sim: SimCluster) -> str:
    return sim.node_exec("head", "docker", "inspect", "-f", "{{.State.Status}}", SUPERVISOR).stdout.strip()


def test_a_failed_up_leaves_the_supervisor_stopped_and_the_next_good_up_starts_a_new_one(deployed, sim_cluster):
    deployed.set("engine.env.STANDIN_CRASH_AT_INIT", "1")  # a broken revision: the worker crashes at init
    failed = deployed.up(check=False)
    assert failed.returncode != 0
    # Stopped before any member was, and left stopped: nothing restarts the broken revision in a loop.
    assert supervisor_state(sim_cluster) == "exited"
    supervisor_config(deployed)
    deployed.up()
    assert_group_serves(deployed, sim_cluster)
    assert supervisor_state(sim_cluster) == "running"
    code, status = spark_llm_status(deployed)
    assert code == 0 and status["state"] == "in sync", status


# The engine image without its ssh client: an image that could run the supervisor but never reach a worker.
NO_SSH_IMAGE = "spark-llm/standin-engine:no-ssh"


def test_an_image_without_ssh_fails_up_naming_the_key_before_anything_is_stopped(deployed, sim_cluster):
    build = f"printf 'FROM {SIM_IMAGE_TAG}\\nRUN rm /usr/bin/ssh\\n' | docker build -q -t {NO_SSH_IMAGE} -"
    sim_cluster.node_exec("head", "bash", "-c", build)
    before = {n: sim_cluster.started_at(n) for n in ("head", "worker-1")}
    supervisor_id = sim_cluster.node_exec("head", "docker", "inspect", "-f", "{{.Id}}", SUPERVISOR).stdout
    deployed.set("supervisor.image", NO_SSH_IMAGE)
    try:
        failed = deployed.up(check=False)
        out = failed.stdout + failed.stderr
        assert failed.returncode != 0
        assert (
            f"spark-llm:supervisor.image: the supervisor's image {NO_SSH_IMAGE} (spark-llm:supervisor.image) has no ssh"
            in out
        ), out[-3000:]
        assert "Traceback" not in out
        # Nothing was stopped: the same engines, the same supervisor, still running.
        assert {n: sim_cluster.started_at(n) for n in before} == before
        assert sim_cluster.node_exec("head", "docker", "inspect", "-f", "{{.Id}}", SUPERVISOR).stdout == supervisor_id
        assert supervisor_state(sim_cluster) == "running"
    finally:
        supervisor_config(deployed)
        sim_cluster.node_exec("head", "docker", "rmi", NO_SSH_IMAGE, check=False)


def test_a_supervisor_killed_or_removed_is_named_by_status_and_preview_and_started_again_by_up(deployed, sim_cluster):
    """`docker kill` (its restart policy takes that for a manual stop) or `docker rm -f` used to go unseen: status said
    in sync, preview and up changed nothing, and the next reboot left the group down with nothing to start it."""
    for removal, seen in ((("kill",), "exited"), (("rm", "-f"), "absent")):
        sim_cluster.node_exec("head", "docker", *removal, SUPERVISOR)
        code, status = spark_llm_status(deployed)
        assert code == 1 and status["state"] == "drift", status
        assert f"the supervisor's container on head is {seen}" in status["summary"], status
        assert status["supervisor"]["container"] == seen, status
    preview = deployed("preview")
    assert "the supervisor's container on the head is absent: `pulumi up` starts it" in preview.stdout + preview.stderr
    assert "spark-supervisor" in preview.stdout
    engines = {n: sim_cluster.started_at(n) for n in ("head", "worker-1")}
    deployed.up()
    assert supervisor_state(sim_cluster) == "running"
    assert {n: sim_cluster.started_at(n) for n in engines} == engines  # the group itself was left alone
    code, status = spark_llm_status(deployed)
    assert code == 0 and status["state"] == "in sync", status
    deployed("preview", "--expect-no-changes")
