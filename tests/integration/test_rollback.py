"""The last good revision comes back (issue 16, item 3), with the real pulumi CLI and `spark-llm` on the sim.

User stories: a relaunch with a flag the engine takes at parse time and dies on at load (`--mem-fraction-static 0.97`:
CUDA out of memory at the KV cache) fails `pulumi up`; its error prints the one command that brings back the revision
that served before, and that command does (a completion answers, the closing note times it from the failure);
`pulumi preview` then tells the truth (the config's revision is pending, and it failed to start last time) and so
does `spark-llm status`; the fixed config converges with one `up`. With `spark-llm:rollout.onFailure: rollback` the
failed `up` starts that command by itself. Ctrl-C during an `up` rolls nothing back.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import Pulumi, complete, ctrl_c, run
from tests.integration.test_interrupted_up import interrupt
from tests.waits import wait_for

pytestmark = pytest.mark.integration

# The engine dies at the KV cache, after its weights (2 s): past the startup grace (1 s), so the readiness gate sees the
# failure. GRACE instead: the head dies within its container's startup grace, the same failed start (issue 31, 5).
BASE = {"timeouts.startupGraceSeconds": "1", "engine.env.STANDIN_PHASE_SECONDS": "weights=2"}
GRACE = {"timeouts.startupGraceSeconds": "10", "engine.env.STANDIN_PHASE_SECONDS": "weights=0"}
ROLLBACK_WAIT = 240
STATE_DIR = Path("~/.local/state/spark-llm").expanduser()
# The rollback's last line: its closing note, or why it stopped (not its progress: waiting, the update it takes, what
# it does about the weights).
PROGRESS = r"waiting|the update of|revision|every node still has|\S+ runs? other weights|the last good start recorded"
ENDED = re.compile(rf"the deployed revision is a rollback|^spark-llm rollback: (?!{PROGRESS})", re.M)


def configure(pulumi: Pulumi, fraction: str | None = None, **more: str) -> None:
    """The sim's config, the BASE knobs, and SGLang's memory fraction (None: the engine's default)."""
    pulumi.reset_config()
    for key, value in {**BASE, **more}.items():
        pulumi.set(key, value)
    if fraction is not None:
        # In the file: `pulumi config set` would read a value that starts with `--` as one of its own flags.
        document = yaml.safe_load(pulumi.config_file.read_text())
        document["config"]["spark-llm:engine"]["flags"] = ["--mem-fraction-static", fraction]
        pulumi.config_file.write_text(yaml.safe_dump(document, sort_keys=False))


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi) -> Iterator[Pulumi]:
    configure(pulumi)
    pulumi.up()
    yield pulumi


def spark_llm(pulumi: Pulumi, *args: str, check: bool = True):
    result = run([sys.executable, "-m", "spark_llm.ops.cli", *args], env=pulumi.env, check=False)
    if check:
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    return result


def failed_up(pulumi: Pulumi) -> tuple[str, str]:
    """`pulumi up` of a revision that runs out of memory: its output and the revision it tried."""
    result = pulumi.up(check=False)
    text = result.stdout + result.stderr
    assert result.returncode != 0, text[-3000:]
    assert "torch.OutOfMemoryError: CUDA out of memory" in text and "engine container is exited" in text
    assert "Traceback" not in text.split("---- ")[0]
    found = re.search(r"starting spark-llm-engine on head: rank=0 profile=\w+ revision=([0-9a-f]+)", text)
    assert found, text[-3000:]
    return text, found.group(1)


def test_a_failed_relaunch_prints_the_command_that_brings_back_the_last_good_revision_and_preview_tells_the_truth(
    deployed,
):
    good = deployed.outputs()["group_revision"]
    configure(deployed, "0.97")
    text, bad = failed_up(deployed)
    command = f"spark-llm rollback --stack sim --config-file {deployed.config_file}"
    assert f"\n      {command}\n" in text, text[-2000:]

    # Ctrl-C in the rollback, wherever it is (reading the stack's history, in its `pulumi up`, restarting the group):
    # Pulumi gets it once and ends cleanly, the command exits 130, nothing stays locked or running.
    for _ in range(5):
        ctrl_c(deployed, shlex.split(command)[1:], 2.0)
    # And the moment the rollback's `pulumi up` has taken the stack's lock: nothing left locked either way, whether
    # the Ctrl-C reaches Pulumi before its handler (it dies; spark-llm releases the lock it took: the unit test
    # tests/unit/ops/test_pulumi_stream.py makes that happen every time) or after it (a clean cancel).
    ctrl_c(deployed, shlex.split(command)[1:], 60.0, at_lock=True)

    # The printed command, as the operator runs it: one `pulumi up` converges.
    back = spark_llm(deployed, *shlex.split(command)[1:])
    note = back.stdout
    assert re.search(
        rf"revision {good} \(weights [0-9a-f]+\) serves again: its first completion answered [\d.]+ s after the failed",
        note,
    )
    assert "the deployed revision is a rollback" in note
    outputs = deployed.outputs()
    assert outputs["group_revision"] == good
    assert complete(outputs)["usage"]["completion_tokens"] == 4
    assert "0.97" in deployed.config_file.read_text()  # the user's stack file is theirs

    # Preview, with the user's config: the failed revision is what the next `up` would start, and it says why.
    preview = deployed("preview", "--expect-no-changes", check=False)
    said = preview.stdout + preview.stderr
    assert preview.returncode != 0, said[-3000:]
    assert f"revision {bad} (this config) failed to start last time" in said
    assert f"the nodes run revision {good} (the one that served before: a rollback)" in said
    assert re.search(rf"group_revision\s*:\s*\"{good}\" => \"{bad}\"", said), said[-3000:]
    config = ("--stack", "sim", "--config-file", str(deployed.config_file))
    status = json.loads(spark_llm(deployed, "status", *config, "--json", check=False).stdout)
    assert status["state"] == "failed_start" and good in status["summary"], status

    # The fixed config converges with one `up`; nothing is left to do after it.
    configure(deployed, "0.9")
    deployed.up()
    assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
    deployed("preview", "--expect-no-changes")


def test_with_rollback_opted_in_a_crash_within_the_startup_grace_brings_the_last_good_revision_back(deployed):
    good = deployed.outputs()["group_revision"]  # what serves now: the module's deployment, or the fix above
    configure(deployed, "0.97", **{"rollout.onFailure": "rollback"}, **GRACE)
    text, bad = failed_up(deployed)
    # The head's watch saw it stop within the grace and left it to the gate: the engine's lines, the head's
    # history records the failure (what preview says afterwards), and the rollback starts by itself.
    assert "spark-llm: the engine on head stopped within the startup grace" in text
    assert "---- head (head): last 30 lines ----" in text
    found = re.search(r"started by itself; .* Its log: (\S+rollback-sim-\S+\.log)", text.replace("\n    ", " "))
    assert found, text[-2000:]
    log = Path(found.group(1))
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    # Its last line: the closing note, or why it stopped.
    wait_for("the rollback to end", lambda: ENDED.search(log.read_text()), ROLLBACK_WAIT, interval_s=1)
    assert re.search(
        rf"revision {good} \(weights [0-9a-f]+\) serves again: its first completion answered [\d.]+ s", log.read_text()
    )
    outputs = deployed.outputs()
    assert outputs["group_revision"] == good
    assert complete(outputs)["usage"]["completion_tokens"] == 4
    preview = deployed("preview", check=False)
    assert f"revision {bad} (this config) failed to start last time" in preview.stdout + preview.stderr


# A relaunch whose engine answers one completion and then none (the stand-in's STANDIN_WEDGE_AFTER_ANSWERS), and the
# wedge bound it is held to (spark-llm:supervisor.wedgeSeconds: the gate's bound too).
WEDGE_S = 9


# Where the wedge begins: right after the first answer (the canary gets none), or after the canary answered too, a
# moment later, within the start's probation (spark-llm:rollout.probationSeconds).
WEDGES = {
    "at-the-canary": ({"engine.env.STANDIN_WEDGE_AFTER_ANSWERS": "1"}, "after its first answer, the start is wedged"),
    "within-the-probation": (
        {"engine.env.STANDIN_WEDGE_AFTER_ANSWERS": "2", "rollout.probationSeconds": "60"},
        "after rank 0's first answer, within the start's probation (60 s), the start is wedged",
    ),
}


@pytest.mark.parametrize("where", list(WEDGES))
def test_with_rollback_opted_in_a_relaunch_that_wedges_after_its_first_answer_fails_and_the_last_good_serves(
    deployed, where
):
    """Issue 41, 4: a revision that answered once and then wedged passed the gate on that answer (or, unanswered, held
    it for readySeconds), and the supervisor restarted into the same wedge until its budget was spent. Now the gate
    fails the start as wedged once the bound has passed, at the canary or, with a probation, a moment after it, and
    under onFailure rollback the last good revision serves again by itself."""
    good = deployed.outputs()["group_revision"]
    knobs, said = WEDGES[where]
    wedging = {**knobs, "supervisor.wedgeSeconds": str(WEDGE_S)}
    configure(deployed, None, **{"rollout.onFailure": "rollback"}, **wedging)
    result = deployed.up(check=False)
    text = (result.stdout + result.stderr).replace("\n    ", " ")
    assert result.returncode != 0, text[-3000:]
    assert said in text, text[-3000:]
    if where == "within-the-probation":
        assert "[head] probation: 60 s from rank 0's first answer (spark-llm:rollout.probationSeconds)" in text
    found = re.search(
        r"the start is wedged: rank 0 has answered no one-token completion of .*? since \S+ \((\d+)"
        r" probes over (\d+) s",
        text,
    )
    assert found, text[-3000:]
    assert WEDGE_S <= int(found.group(2)) <= 3 * WEDGE_S, found.group(0)  # the bound, not readySeconds (900 s)
    assert "---- head (head): last 30 lines ----" in text
    log = Path(re.search(r"Its log: (\S+rollback-sim-\S+\.log)", text).group(1))  # type: ignore[union-attr]
    wait_for("the rollback to end", lambda: ENDED.search(log.read_text()), ROLLBACK_WAIT, interval_s=1)
    assert re.search(rf"revision {good} \(weights [0-9a-f]+\) serves again", log.read_text()), log.read_text()[-2000:]
    outputs = deployed.outputs()
    assert outputs["group_revision"] == good
    assert complete(outputs)["usage"]["completion_tokens"] == 4


def test_ctrl_c_during_an_up_rolls_nothing_back(deployed):
    configure(deployed, "0.97", **{"rollout.onFailure": "rollback", "engine.env.STANDIN_PHASE_SECONDS": "weights=4"})
    before = set(STATE_DIR.glob("rollback-*.log")) if STATE_DIR.exists() else set()
    out, _ = interrupt(deployed, "spark-engine-ready creating replacement", signal.SIGINT)
    assert "started by itself" not in out and "spark-llm rollback --stack" not in out, out[-3000:]
    # The CLI ended after the gate did (it reads the gate's output to the end): no rollback started at all.
    after = set(STATE_DIR.glob("rollback-*.log")) if STATE_DIR.exists() else set()
    assert after == before


SOURCE, SERVED = "/srv/models/it-rollback-source", "/srv/models/it-rollback"
HEAD_WEIGHTS = {"model.path": SERVED, "model.source.kind": "head", "model.source.path": SOURCE}


def files_on(sim, node: str) -> str:
    """Every file under the served path with its inode, size, mtime and ctime: a copy or a touch changes them."""
    find = f"find {SERVED} -type f -exec stat -c '%n %i %s %Y %Z' {{}} + | sort"
    return sim.node_exec(node, "sh", "-c", find).stdout


def weights_digest(sim, node: str) -> str:
    return json.loads(sim.node_exec(node, "cat", f"{SERVED}/.spark-llm-manifest.json").stdout)["digest"]


def test_a_relaunch_that_changed_the_weights_rolls_back_onto_the_weights_its_revision_served(deployed, sim_cluster):
    """Issue 31, 1: a relaunch that changed the weights (a file changed, one added) and a flag the engine dies on.
    The rollback used to serve the old flags on the new files and say it copied none; now it puts back the kept
    version on every node (hard links) and says so, and the fixed `up` copies only what differs from it."""
    sim_cluster.node_exec(
        "head",
        "bash",
        "-c",
        f"rm -rf {SOURCE} {SERVED} && mkdir -p {SOURCE} && cd {SOURCE}"
        " && for i in 1 2 3; do head -c 2M /dev/urandom > model-0000$i.safetensors; done"
        """ && echo '{"model_type": "standin"}' > config.json""",
    )
    try:
        configure(deployed, **HEAD_WEIGHTS)
        deployed.up()
        good = deployed.outputs()["weights_manifest_digest"]
        sim_cluster.node_exec(
            "head",
            "bash",
            "-c",
            f"cd {SOURCE} && head -c 2M /dev/urandom > model-00001.safetensors"
            " && head -c 2M /dev/urandom > model-00009.safetensors",
        )
        configure(deployed, "0.97", **HEAD_WEIGHTS)
        text, _ = failed_up(deployed)
        assert "can serve again, on its own weights (kept on every node)" in text.replace("\n    ", " ")
        assert all(weights_digest(sim_cluster, n) != good for n in ("head", "worker-1"))  # the new ones

        back = spark_llm(deployed, "rollback", "--stack", "sim", "--config-file", str(deployed.config_file))
        note = back.stdout
        assert f"the version {good[:16]} they kept is put back (hard links: no byte copied)" in note, note
        assert re.search(rf"revision [0-9a-f]+ \(weights {good[:16]}\) serves again", note), note
        for node in ("head", "worker-1"):
            assert weights_digest(sim_cluster, node) == good, node
            gone = sim_cluster.node_exec(node, "test", "-e", f"{SERVED}/model-00009.safetensors", check=False)
            assert gone.returncode != 0, node
        assert deployed.outputs()["weights_manifest_digest"] == good
        assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
        kept = f"{SERVED}/.spark-llm-versions/{good}/.spark-llm-manifest.json"
        for node in ("head", "worker-1"):  # the good version stays kept: its start was the rollback's own
            assert sim_cluster.node_exec(node, "test", "-f", kept, check=False).returncode == 0, node

        # Issue 41, 5: a second rollback in a row copied the edited source to every node and deleted the kept good
        # version. Now the last good revision already serves on its weights: it changes nothing and says so.
        files = {n: files_on(sim_cluster, n) for n in ("head", "worker-1")}
        started = {n: sim_cluster.started_at(n) for n in ("head", "worker-1")}
        again = spark_llm(deployed, "rollback", "--stack", "sim", "--config-file", str(deployed.config_file))
        assert "already serves on weights" in again.stdout and "nothing was changed" in again.stdout, again.stdout
        assert {n: files_on(sim_cluster, n) for n in files} == files  # no byte moved, no file touched
        assert {n: sim_cluster.started_at(n) for n in started} == started  # nothing restarted
        for node in ("head", "worker-1"):
            assert sim_cluster.node_exec(node, "test", "-f", kept, check=False).returncode == 0, node

        # The fixed config: one `up`, which copies only what differs from the restored version.
        configure(deployed, "0.9", **HEAD_WEIGHTS)
        out = deployed.up().stdout
        assert "copy: sending 2 of 5 files" in out, out[-3000:]
        assert "fanout: worker-1 needs 2 of 5 files" in out, out[-3000:]
        assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
    finally:
        for node in ("head", "worker-1"):
            sim_cluster.node_exec(node, "rm", "-rf", SOURCE, SERVED, check=False)
