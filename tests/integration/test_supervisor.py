"""The group's supervisor (spark-llm:supervisor) on the sim (1 head + 1 worker), with the real pulumi CLI.

User stories: a worker reboots (its node container restarted: engine exited, disk kept), then the head does; the
group serves again without anyone running a command, workers started before the head, within the start time plus
30 s, and the next `pulumi up` restarts nothing (the supervisor started the same containers again, in order). A
member that crashes on every start is restarted at most maxRestarts times, then the group is left stopped and
`spark-llm status` fails saying the supervisor gave up and why; once the cause is gone, `pulumi up` converges.
A worker whose weights a cut copy left unverified is not started after its reboot: the supervisor waits, saying
why, `spark-llm status` fails naming the weights, and `pulumi up` copies, verifies and restarts (issue 31, 2).
The supervisor reaches the worker with a key of its own that runs docker inspect/start/stop/logs on the engine there
and nothing else (issue 31, 11), and `pulumi destroy` takes that key off the worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import SIM, SIM_IMAGE_TAG, Pulumi, SimCluster, assert_group_serves, complete, run
from tests.integration.secrets_scan import NODES, ArgvSampler, files_others_read, leaks
from tests.waits import wait_for

pytestmark = pytest.mark.integration

SUPERVISOR = "spark-llm-supervisor"
SUPERVISOR_STATE = "/root/spark-llm/supervisor-state/state.json"
# The worker's engine crashes at init while this file exists on its node (sim/engine/standin_engine/knobs.py:
# STANDIN_CRASH_WHILE_FILE; the container sees the node's cache dir as ~/.cache).
CRASH_FILE_IN_CONTAINER = "/root/.cache/standin-crash"
CRASH_FILE_ON_NODE = "/root/spark-llm/cache/standin-crash"
MAX_RESTARTS = 2
# The head's engine answers no generation while this file exists, its container up and /health 200 (knobs.py:
# STANDIN_WEDGE_WHILE_FILE); rank 0 answering nothing this long is a wedge (spark-llm:supervisor.wedgeSeconds).
WEDGE_FILE_IN_CONTAINER = "/root/.cache/standin-wedge"
WEDGE_FILE_ON_NODE = "/root/spark-llm/cache/standin-wedge"
WEDGE_S = 6
# The supervisor's own key on the head, and what a worker lets it run (spark_llm.plan.supervisor_key).
SUPERVISOR_KEY = "/root/spark-llm/supervisor-key/id_ed25519"
WORKER_AUTHORIZED_KEYS = "/root/.ssh/authorized_keys"
ALLOW_SCRIPT = "/root/spark-llm/supervisor-allow.sh"
MEMORY_PROBE = "/root/spark-llm/memory.sh"  # beside it: what its `spark-llm memory` runs
# Every command line seen on this machine while the module's `pulumi up` ran (secrets_scan.ArgvSampler).
UP_COMMAND_LINES: set[str] = set()
# A node's weights record (spark_llm.group.weights), and what a fan-out cut short leaves in it on a worker.
WEIGHTS_RECORD = "/root/spark-llm/state/weights"
CUT_SHORT_RECORD = "unverified -"
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
    pulumi.set("supervisor.wedgeSeconds", str(WEDGE_S))
    pulumi.set("engine.env.STANDIN_WEDGE_WHILE_FILE", WEDGE_FILE_IN_CONTAINER)


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi, sim_cluster: SimCluster) -> Iterator[Pulumi]:
    supervisor_config(pulumi)
    with ArgvSampler() as sampler:
        pulumi.up()
    UP_COMMAND_LINES.update(sampler.seen)
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


def supervisor_ssh(sim: SimCluster, request: str | None) -> subprocess.CompletedProcess[str]:
    """From inside the supervisor's container, ssh to the worker as scripts/supervisor.py does (its spec's key, pins
    and options: Node.ssh), asking `request` (None: a login shell)."""
    spec = json.loads(
        sim.node_exec("head", "docker", "exec", SUPERVISOR, "cat", "/spark-llm-supervisor/spec.json").stdout
    )
    worker = next(m for m in spec["members"] if m["role"] == "worker")
    ssh = ["ssh", "-i", spec["key_path"], "-o", f"UserKnownHostsFile={spec['known_hosts']}"]
    ssh += [w for o in spec["ssh_options"] for w in ("-o", o)]
    ssh += ["-p", str(worker["port"]), f"{worker['user']}@{worker['address']}"]
    return sim.node_exec("head", "docker", "exec", SUPERVISOR, *ssh, *(["--", request] if request else []), check=False)


def test_the_supervisors_own_key_runs_only_docker_inspect_start_stop_logs_on_the_engine_on_a_worker(
    deployed, sim_cluster
):
    """It used to hold the head's fabric key, a root shell on every worker; its own key runs nothing else."""
    for request in (
        None,
        "id",
        "docker run --rm --entrypoint id spark-llm/standin-engine:sim",
        "docker inspect spark-llm-supervisor",
        "docker exec spark-llm-engine id",
        "docker inspect spark-llm-engine; id",
        "docker inspect $(id) spark-llm-engine",
    ):
        refused = supervisor_ssh(sim_cluster, request)
        assert refused.returncode == 126, (request, refused.returncode, refused.stdout, refused.stderr)
        assert "uid=" not in refused.stdout + refused.stderr, request
        assert "the supervisor's key may only run docker inspect|start|stop|logs on spark-llm-engine" in refused.stderr
    inspect = supervisor_ssh(sim_cluster, "docker inspect spark-llm-engine")
    assert inspect.returncode == 0, inspect.stderr
    assert json.loads(inspect.stdout)[0]["Name"] == "/spark-llm-engine"
    logs = supervisor_ssh(sim_cluster, "docker logs --tail 5 spark-llm-engine 2>&1")
    assert logs.returncode == 0 and logs.stdout.strip(), logs.stderr
    # The head's fabric key (~/.ssh) is no longer in the container.
    mounts = sim_cluster.node_exec("head", "docker", "inspect", "-f", "{{json .Mounts}}", SUPERVISOR).stdout
    assert "/.ssh" not in mounts and "/root/spark-llm/supervisor-key" in mounts, mounts
    # Its private key: 0600 in a 0700 dir on the head, and nowhere else in the open.
    modes = sim_cluster.node_exec("head", "stat", "-c", "%a", SUPERVISOR_KEY, SUPERVISOR_KEY.rsplit("/", 1)[0])
    assert modes.stdout.split() == ["600", "700"]
    private = sim_cluster.node_exec("head", "cat", SUPERVISOR_KEY).stdout
    # Its base64 lines but the first: that one is the format's header (`openssh-key-v1`, no cipher, one ed25519 key),
    # the same in every such key, the operator's own in the state's (encrypted) connection included.
    needles = {
        "supervisor key": [line for line in private.splitlines()[2:] if len(line) >= 20 and "PRIVATE" not in line]
    }
    assert needles["supervisor key"]
    assert not leaks(deployed("stack", "export", "--show-secrets").stdout, needles)
    assert not [line[:200] for line in UP_COMMAND_LINES if leaks(line, needles)]
    for node in NODES:
        readable = files_others_read(sim_cluster, node)
        assert not [path for path, content in readable.items() if leaks(content.decode(errors="replace"), needles)]
    line = f'restrict,command="{ALLOW_SCRIPT} spark-llm-engine" ssh-ed25519 '
    authorized = sim_cluster.node_exec("worker-1", "cat", WORKER_AUTHORIZED_KEYS).stdout.splitlines()
    assert [k for k in authorized if k.startswith(line) and k.endswith(" spark-llm-supervisor@sim")], authorized


def test_its_line_taken_off_a_worker_is_drift_that_preview_names_and_up_puts_back(deployed, sim_cluster):
    engines = {n: sim_cluster.started_at(n) for n in NODES}
    sim_cluster.node_exec("worker-1", "sed", "-i", "/ spark-llm-supervisor@sim$/d", WORKER_AUTHORIZED_KEYS)
    assert supervisor_ssh(sim_cluster, "docker inspect spark-llm-engine").returncode == 255  # ssh: not allowed in
    preview = deployed("preview")
    assert "drift: the supervisor's key on worker-1" in preview.stdout + preview.stderr
    deployed.up()
    assert supervisor_ssh(sim_cluster, "docker inspect spark-llm-engine").returncode == 0
    assert {n: sim_cluster.started_at(n) for n in NODES} == engines  # the group was left alone
    deployed("preview", "--expect-no-changes")


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
    # The rebooted node is named first (issue 41, 7: its FinishedAt, recorded at its boot, named the other first).
    assert restarts[0]["reason"].startswith("worker-1's engine container is exited (exit code 255: worker-1 went down")
    assert restarts[1]["reason"].startswith("head's engine container is exited (exit code 255: head went down"), (
        restarts
    )


def supervisor_state(sim: SimCluster) -> str:
    return sim.node_exec("head", "docker", "inspect", "-f", "{{.State.Status}}", SUPERVISOR).stdout.strip()


def supervisor_waiting(sim: SimCluster) -> str:
    """What the supervisor's state on the head says it waits for ("" for nothing, or not read)."""
    found = sim.node_exec("head", "cat", SUPERVISOR_STATE, check=False)
    try:
        return (json.loads(found.stdout).get("waiting") or "") if found.returncode == 0 else ""
    except ValueError:  # read while being written
        return ""


def test_a_worker_rebooted_on_weights_a_cut_copy_left_unverified_is_not_started_until_up_verifies_them(
    deployed, sim_cluster
):
    """A weights copy killed midway leaves the worker's record `unverified -`; a reboot then had the supervisor start
    the group on those weights. Now it starts nothing and waits, saying why, until `pulumi up` copies and verifies."""
    assert not sim_cluster.node_exec("worker-1", "cat", WEIGHTS_RECORD).stdout.startswith("unverified")
    # As scripts/fanout.py leaves it when it is killed after its first byte reached the worker.
    sim_cluster.node_exec("worker-1", "bash", "-c", f"echo {CUT_SHORT_RECORD!r} > {WEIGHTS_RECORD}")
    before = {n: sim_cluster.started_at(n) for n in NODES}
    run(["docker", "restart", "-t", "2", sim_cluster.container("worker-1")])
    reason = (
        "weights on worker-1 are not verified (a copy was cut short): pulumi up copies and verifies them, then"
        " restarts the group"
    )
    wait_for("the supervisor to wait on worker-1's weights", lambda: supervisor_waiting(sim_cluster) == reason, 120, 1)
    code, status = spark_llm_status(deployed)
    assert code == 1, status
    assert status["supervisor"]["waiting"] == reason, status
    assert [w for w in status["weights"] if "worker-1" in w and "not verified" in w], status["weights"]
    # Seconds of the supervisor's 1 s polls later (status's own run): no engine was started, no restart recorded.
    assert {n: sim_cluster.started_at(n) for n in NODES} == before
    worker = sim_cluster.node_exec("worker-1", "docker", "inspect", "-f", "{{.State.Status}}", "spark-llm-engine")
    assert worker.stdout.strip() == "exited"
    assert all(r["result"] == "served" for r in status["supervisor"]["restarts"]), status["supervisor"]
    assert supervisor_waiting(sim_cluster) == reason
    # The weights step runs again (its record says unverified: drift), then the group restarts in order.
    deployed.up()
    assert_group_serves(deployed, sim_cluster)
    record = sim_cluster.node_exec("worker-1", "cat", WEIGHTS_RECORD).stdout
    assert not record.startswith("unverified") and len(record.split()) == 2, record
    assert supervisor_state(sim_cluster) == "running"
    wait_for("the new supervisor to watch, waiting for nothing", lambda: not supervisor_waiting(sim_cluster), 60, 1)
    code, status = spark_llm_status(deployed)
    assert code == 0 and status["state"] == "in sync", status


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


def supervisor_record(sim: SimCluster) -> dict:
    """The supervisor's state file on the head ({} when not read, or read while being written)."""
    found = sim.node_exec("head", "cat", SUPERVISOR_STATE, check=False)
    try:
        return json.loads(found.stdout) if found.returncode == 0 else {}
    except ValueError:
        return {}


def test_a_wedged_head_is_restarted_within_its_bound_and_status_says_wedged(deployed, sim_cluster):
    """An engine that keeps running and stops answering (a hung collective): the supervisor judged containers only
    and waited forever. Now it restarts the group once rank 0 answered nothing for wedgeSeconds, and status says so.
    (The test above ended with a new group: a new budget. While the file stays, the restarted group is wedged too:
    it is removed once status has spoken, before a second restart could fail.)"""
    outputs = deployed.outputs()
    before = {n: sim_cluster.started_at(n) for n in NODES}
    start = time.monotonic()
    sim_cluster.node_exec("head", "touch", WEDGE_FILE_ON_NODE)
    try:

        def restarting_wedged() -> bool:
            restarts = supervisor_record(sim_cluster).get("restarts") or []
            return bool(restarts) and restarts[-1].get("cause") == "wedged"

        wait_for("the supervisor to restart the wedged group", restarting_wedged, WEDGE_S + 60, 0.5)
        detected = time.monotonic() - start
        # While the file stays, every start is wedged too: status says so from the record or on its own.
        code, status = spark_llm_status(deployed)
        assert code == 1 and status["state"] == "wedged", status
    finally:
        sim_cluster.node_exec("head", "rm", "-f", WEDGE_FILE_ON_NODE)
    wait_for("the group to serve again", lambda: serving_again(sim_cluster, outputs, before), 120, 1)

    def served() -> bool:
        return (supervisor_record(sim_cluster).get("restarts") or [{}])[-1].get("result") == "served"

    wait_for("the supervisor to record its restart as served", served, 60, 1)
    serving = time.monotonic() - start
    print(f"supervisor-timing wedge -> restart {detected:.1f} s, -> serving {serving:.1f} s (bound {WEDGE_S} s)")
    restarts = supervisor_record(sim_cluster)["restarts"]
    assert restarts[-1]["result"] == "served" and all(r.get("cause") == "wedged" for r in restarts), restarts
    reason = restarts[0]["reason"]
    assert "answered no one-token completion of" in reason and "(POST /v1/completions) since " in reason, reason
    assert "/health 200" in reason, reason  # the stand-in's wedge: up by its liveness route, answering nothing
    # Found within the bound and its probes (3 of 2 s at most, 1 s polls), not waited on forever.
    assert detected <= WEDGE_S + 3 * 2 + 3 * 1 + 10, detected
    assert_group_serves(deployed, sim_cluster)


def test_a_group_wedged_on_every_start_is_left_stopped_after_the_budget(deployed, sim_cluster):
    """Containers up, /health 200, no answer, and the same after each restart: the budget ends it, as for crashes.
    The test above spent one restart (or two) of this group's budget (maxRestarts 2): the next wedge spends the rest.
    The next test's `pulumi up` starts the group again (the cause gone)."""
    sim_cluster.node_exec("head", "touch", WEDGE_FILE_ON_NODE)
    try:
        wait_for("the supervisor to give up", lambda: bool(supervisor_record(sim_cluster).get("gave_up")), 180, 1)
        code, status = spark_llm_status(deployed)
        assert code != 0 and status["state"] == "supervisor gave up", status
        reason = status["supervisor"]["gave_up"]["reason"]
        assert reason.startswith("wedged: rank 0 has answered no one-token completion") and "since " in reason, reason
        assert f"after {MAX_RESTARTS} restarts" in reason, reason
        restarts = status["supervisor"]["restarts"]
        assert [r.get("cause") for r in restarts] == ["wedged"] * MAX_RESTARTS, restarts
        # A restart into the wedge fails as wedged (this test's, or the test above's first if status was slow).
        assert any(r["result"].startswith("failed: wedged: ") for r in restarts), restarts
        states = {
            n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.State.Status}}", "spark-llm-engine").stdout
            for n in NODES
        }
        assert all(s.strip() == "exited" for s in states.values()), states
    finally:
        sim_cluster.node_exec("head", "rm", "-f", WEDGE_FILE_ON_NODE)


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


def test_a_worker_whose_memory_cannot_hold_its_engine_is_not_restarted_into_until_it_can(deployed, sim_cluster):
    """Issue 32, 1: a worker's engine died and its node has 2 GiB available (SGLang's engine alone takes ~6): the
    supervisor used to restart the group into it, spending its budget on starts that fail. Now it waits, naming the
    node and the numbers (read through its key: `spark-llm memory`), and restarts the group once the memory is back."""
    outputs = deployed.outputs()
    before = {n: sim_cluster.started_at(n) for n in NODES}
    recorded = len(supervisor_restarts(sim_cluster))
    run([str(SIM), "memory", "worker-1", "--total-gib", "121", "--free-gib", "2"])
    try:
        sim_cluster.node_exec("worker-1", "docker", "kill", "spark-llm-engine")
        refused = "memory admission worker-1: refused: needs 6.0 GiB"

        def waiting_on_memory() -> bool:
            return (supervisor_waiting(sim_cluster) or "").startswith(refused)

        wait_for("the supervisor to wait on worker-1's memory", waiting_on_memory, 120, 1)
        waiting = supervisor_waiting(sim_cluster) or ""
        assert "has 2.0 GiB (MemAvailable 2.0 GiB) of 121.0 GiB" in waiting, waiting
        assert len(supervisor_restarts(sim_cluster)) == recorded  # no restart spent of its budget
        worker = sim_cluster.node_exec("worker-1", "docker", "inspect", "-f", "{{.State.Status}}", "spark-llm-engine")
        assert worker.stdout.strip() == "exited"
    finally:
        run([str(SIM), "memory", "worker-1", "off"])
    # The memory is back (the knob off: the machine's own meminfo): the supervisor restarts the group by itself.
    bound = start_seconds(outputs) + SLACK_S + 60
    wait_for("the group to serve again", lambda: serving_again(sim_cluster, outputs, before), bound, 1)


def test_destroy_takes_the_supervisors_key_off_the_worker_and_the_head(deployed, sim_cluster):
    """`pulumi destroy` removes its authorized_keys line (that line only), the worker's allow script and the key."""
    before = sim_cluster.node_exec("worker-1", "cat", WORKER_AUTHORIZED_KEYS).stdout.splitlines()
    ours = [k for k in before if k.endswith(" spark-llm-supervisor@sim")]
    assert len(ours) == 1, before
    deployed("destroy", "--yes", "--skip-preview")
    after = sim_cluster.node_exec("worker-1", "cat", WORKER_AUTHORIZED_KEYS).stdout.splitlines()
    assert after == [k for k in before if k not in ours]
    assert sim_cluster.node_exec("worker-1", "test", "-e", ALLOW_SCRIPT, check=False).returncode == 1
    assert sim_cluster.node_exec("worker-1", "test", "-e", MEMORY_PROBE, check=False).returncode == 1
    assert sim_cluster.node_exec("head", "test", "-e", SUPERVISOR_KEY.rsplit("/", 1)[0], check=False).returncode == 1
