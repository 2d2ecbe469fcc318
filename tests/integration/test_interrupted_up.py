"""`pulumi up` interrupted mid-rollout (Ctrl-C, or killed) on the sim, then recovered, with the real CLI.

User story: an operator presses Ctrl-C during a relaunch, or their laptop dies: the CLI stops at any point of the
ordered restart (the head stopped, the workers stopped, a worker starting) or of the weights copy. Afterwards
the recovery of docs/troubleshooting.md brings the group back: one engine container per node, all of the new
revision, started worker first, serving; the weights on every node still match the head's manifest.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.integration.conftest import SIM, Pulumi, SimCluster, assert_group_serves, descendants, run
from tests.waits import wait_for

pytestmark = pytest.mark.integration

REVISION_LABEL = "spark-llm.group-revision"
NODES = ("head", "worker-1")
# Where the rollout is when the signal lands: a line of `pulumi up`'s own output.
STAGES = {
    "head-stopped": "spark-engine-stop-head created replacement",
    "workers-stopped": "spark-engine-stop-worker-1 created replacement",
    "worker-starting": "spark-engine-worker-1 creating replacement",
}
MODEL_PATH = "/srv/models/it-interrupt"
WRITE_MODEL = (
    f"set -e; rm -rf {MODEL_PATH}; mkdir -p {MODEL_PATH}; cd {MODEL_PATH}\n"
    "for i in 1 2 3; do head -c 10M /dev/urandom > model-0000$i.safetensors; done\n"
    """echo '{"model_type": "standin"}' > config.json\n"""
)


def recover(pulumi: Pulumi, sig: int) -> subprocess.CompletedProcess[str]:
    """The recovery docs/troubleshooting.md gives, and nothing else: after Ctrl-C, `pulumi up` again; after a
    killed CLI, whose lock on the stack is left behind, `pulumi cancel --yes` (no other `pulumi` runs on this
    stack) and `pulumi up`."""
    if sig == signal.SIGKILL:
        # The CLI died wherever it was, mid-write of the state included: the state file is written to a temp file
        # and renamed; a sidecar written in place (`.attrs`, which a CI run once found empty, after which every
        # command failed with "failed to load checkpoint: EOF") must not exist (tools/env.sh: `metadata=skip`).
        assert not list(pulumi.backend_dir.glob("**/*.attrs"))
        locked = pulumi.up(check=False)
        assert locked.returncode != 0 and "the stack is currently locked" in locked.stdout + locked.stderr
        pulumi("cancel", "--yes")
    return pulumi.up(check=False)


def recover_after(pulumi: Pulumi, sig: int, out: str, stopped: float, stage: str) -> None:
    """The interrupted run said nothing of ours in a traceback; the recovery succeeds (its time printed)."""
    assert "Traceback" not in out
    started = time.monotonic()
    result = recover(pulumi, sig)
    took = time.monotonic() - started
    print(f"\n{stage} {signal.Signals(sig).name}: CLI gone {stopped:.1f} s after the signal; recovered in {took:.1f} s")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]


def interrupt(pulumi: Pulumi, marker: str, sig: int, timeout: float = 300) -> tuple[str, float]:
    """Start `pulumi up`; when `marker` shows in its output, send `sig` to the CLI. Its output, and the seconds
    from the signal to the CLI's exit."""
    # Its own process group, as a terminal runs it: Ctrl-C reaches the CLI and its plugins alike, and a killed
    # laptop takes them all (os.killpg).
    proc = pulumi.start_up(bufsize=1, start_new_session=True)
    assert proc.stdout
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    sent = None
    plugins: list[int] = []
    for line in proc.stdout:
        lines.append(line)
        if sent is None and marker in line:
            plugins = descendants(proc.pid)
            os.killpg(proc.pid, sig)
            sent = time.monotonic()
        if time.monotonic() > deadline:
            proc.kill()
            break
    proc.wait(timeout=120)
    # The plugins run in process groups of their own and outlive a dead CLI for minutes (Pulumi's providers
    # poll the engine's health): end them here, so that no test leaves processes behind.
    for pid in plugins:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert sent is not None, f"`{marker}` never showed:\n" + "".join(lines)[-3000:]
    return "".join(lines), time.monotonic() - sent


def assert_one_serving_group(pulumi: Pulumi, sim: SimCluster, old_revision: str | None = None) -> None:
    """The group serves (conftest.assert_group_serves), every engine container of the stack's revision, which
    is new when old_revision is given."""
    outputs = assert_group_serves(pulumi, sim)
    if old_revision is not None:
        assert outputs["group_revision"] != old_revision
    for node in NODES:
        labels = sim.node_exec(node, "docker", "inspect", "-f", "{{json .Config.Labels}}", "spark-llm-engine").stdout
        assert json.loads(labels)[REVISION_LABEL] == outputs["group_revision"], node


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi, sim_cluster: SimCluster) -> Iterator[Pulumi]:
    sim_cluster.node_exec("head", "bash", "-c", WRITE_MODEL)
    pulumi.use_head_weights(MODEL_PATH)
    pulumi.up()
    yield pulumi
    run([str(SIM), "link", "off"], check=False)
    for node in ("head", "worker-1"):
        sim_cluster.node_exec(node, "rm", "-rf", MODEL_PATH, check=False)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "killed"])
@pytest.mark.parametrize("stage", list(STAGES))
def test_an_interrupted_rollout_recovers_to_one_serving_group_of_the_new_revision(deployed, sim_cluster, stage, sig):
    old = deployed.outputs()["group_revision"]
    deployed.set("engine.env.IT_ROLLOUT", uuid.uuid4().hex[:8])  # a new revision: the whole group restarts
    out, stopped = interrupt(deployed, STAGES[stage], sig)
    recover_after(deployed, sig, out, stopped, stage)
    assert_one_serving_group(deployed, sim_cluster, old)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "killed"])
def test_an_up_interrupted_during_the_weights_copy_resumes_it_and_serves(deployed, sim_cluster, sig):
    old_digest = deployed.outputs()["weights_manifest_digest"]
    head_started = sim_cluster.started_at("head")
    # New weights on the head (a new file and a changed one): the copy runs, then the group restarts.
    sim_cluster.node_exec(
        "head",
        "bash",
        "-c",
        f"cd {MODEL_PATH} && head -c 30M /dev/urandom > model-00009.safetensors"
        f" && head -c 30M /dev/urandom > model-00001.safetensors",
    )
    run([str(SIM), "link", "40"])  # 5 MB/s: the copy takes seconds, the signal lands in it
    try:
        out, stopped = interrupt(deployed, "weights worker-1: ", sig)
    finally:
        run([str(SIM), "link", "off"])
    recover_after(deployed, sig, out, stopped, "weights copy")
    assert deployed.outputs()["weights_manifest_digest"] != old_digest
    assert sim_cluster.started_at("head") != head_started  # new weights: the group restarted on them
    assert_one_serving_group(deployed, sim_cluster)
    sums = {n: sim_cluster.node_exec(n, "bash", "-c", f"cd {MODEL_PATH} && sha256sum -- *").stdout for n in NODES}
    assert sums["worker-1"] == sums["head"]


def copy_processes(sim: SimCluster) -> dict[str, list[str]]:
    """The fan-out's processes left on each node: the program, rsync (client or daemon), the manifest hasher."""
    found = {}
    for node in NODES:
        ps = sim.node_exec(node, "ps", "-eo", "args=").stdout.splitlines()
        found[node] = [p for p in ps if re.search(r"fanout\.py|\brsync\b|manifest.* hash ", p)]
    return found


def test_a_fanout_killed_mid_copy_leaves_nothing_running_and_its_weights_unverified(deployed, sim_cluster):
    """Issue 31, 2: `kill -9` of the head's fan-out at its first progress line. Within seconds no copy process is
    left on any node (the rsync it started once finished the file with nothing verifying it); `spark-llm status`
    and `pulumi preview` both say the weights differ; one `pulumi up` copies, verifies and serves."""
    sim_cluster.node_exec(
        "head", "bash", "-c", f"cd {MODEL_PATH} && head -c 30M /dev/urandom > model-00008.safetensors"
    )
    run([str(SIM), "link", "40"])  # 5 MB/s: the copy takes seconds, the kill lands in it
    try:
        proc = deployed.start_up(bufsize=1)
        assert proc.stdout
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "weights worker-1: " in line:
                sim_cluster.node_exec("head", "pkill", "-9", "-f", "fanout.py")
                break
        lines += proc.stdout.readlines()
        assert proc.wait(timeout=300) != 0, "".join(lines)[-3000:]
    finally:
        run([str(SIM), "link", "off"])
    said = "".join(lines).replace("\n    ", " ")
    assert "the copy to the workers was killed before it ended (signal 9)" in said, said[-3000:]
    wait_for("no copy process on any node", lambda: not any(copy_processes(sim_cluster).values()), 10, interval_s=0.5)

    argv = [sys.executable, "-m", "spark_llm.ops.cli", "status", "--stack", "sim", "--config-file"]
    status = run([*argv, str(deployed.config_file), "--json"], env=deployed.env, check=False)
    report = json.loads(status.stdout)
    assert status.returncode == 1 and report["state"] == "drift", report
    assert report["weights"] == ["weights on worker-1: a copy began and was not verified (cut short)"], report
    preview = deployed("preview", check=False)
    said = preview.stdout + preview.stderr
    assert "weights on worker-1: a copy began and was not verified (cut short)" in said, said[-3000:]

    deployed.up()
    assert_one_serving_group(deployed, sim_cluster)
