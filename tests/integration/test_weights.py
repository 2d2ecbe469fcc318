"""The model's weights on the sim with the real pulumi CLI: uploaded from here to the head, over the fabric to the
worker, identical by manifest, re-synced file by file, resumed, kept on destroy.

User story: an operator points model.source at a directory on their machine and runs `pulumi up`; every node
gets the same bytes at model.path. They change a file (or point at the next revision's directory): preview
says the weights sync and the group restarts, and `up` moves only that file. A copy cut short resumes where it
stopped. `pulumi destroy` stops the engines and leaves the weights, unless model.purgeOnDestroy.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_llm.plan.scripts import MANIFEST_TOOL
from spark_llm.plan.weights import steps as weights
from spark_llm.plan.weights import sync as weights_sync
from tests.integration.conftest import STACK_FILE, Pulumi, SimCluster, run

pytestmark = pytest.mark.integration

MODEL_PATH = "/srv/models/it-weights"
NODES = ("head", "worker-1")
SOURCE_FILES = {
    "config.json": b'{"model_type": "standin"}\n',
    "tokenizer.json": b'{"vocab": {}}\n',
    "model-00001-of-00002.safetensors": bytes(range(256)) * 1024,  # 256 KB
    "model-00002-of-00002.safetensors": bytes(reversed(range(256))) * 1024,
}


def local_sha256(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


def node_sha256(sim: SimCluster, node: str) -> dict[str, str]:
    out = sim.node_exec(node, "bash", "-c", f"cd {MODEL_PATH} && sha256sum -- *").stdout
    return {name: digest for digest, name in (line.split(maxsplit=1) for line in out.splitlines())}


def node_inodes(sim: SimCluster, node: str) -> dict[str, str]:
    out = sim.node_exec(node, "bash", "-c", f"cd {MODEL_PATH} && stat -c '%n %i' -- *").stdout
    return dict(line.split() for line in out.splitlines())


def local_digest(directory: Path) -> str:
    out = subprocess.run([sys.executable, str(MANIFEST_TOOL), "scan", str(directory)], capture_output=True, text=True)
    return weights.parse_digest(out.stdout)


def sent_line(out: str, what: str) -> tuple[int, int]:
    """(literal, matched) bytes from the `WHAT: sent N files in ... (literal L B, matched M B, ...)` line."""
    match = re.search(rf"{re.escape(what)}: sent \d+ files in [\d.]+ s \(literal ([\d,]+) B, matched ([\d,]+) B", out)
    assert match, out[-3000:]
    return int(match.group(1).replace(",", "")), int(match.group(2).replace(",", ""))


@pytest.fixture(scope="module")
def source(pulumi: Pulumi, sim_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The sim stack with model.source a local directory of a few small files and model.path MODEL_PATH.

    Pulumi.sim.yaml is restored afterwards, and MODEL_PATH is removed from every node before and after.
    """
    saved = STACK_FILE.read_text()
    directory = tmp_path_factory.mktemp("weights-source")
    for name, data in SOURCE_FILES.items():
        (directory / name).write_bytes(data)
    for node in NODES:
        sim_cluster.node_exec(node, "rm", "-rf", MODEL_PATH)
    pulumi("config", "set", "--path", "model.path", MODEL_PATH)
    pulumi("config", "set", "--path", "model.source.kind", "local")
    pulumi("config", "set", "--path", "model.source.path", str(directory))
    yield directory
    STACK_FILE.write_text(saved)
    for node in NODES:
        sim_cluster.node_exec(node, "rm", "-rf", MODEL_PATH, check=False)


def test_up_from_nothing_puts_identical_copies_on_head_and_worker(source, pulumi, sim_cluster):
    out = pulumi.up().stdout
    assert "upload to head: sending 4 of 4 files" in out
    assert "fanout: worker-1 needs 4 of 4 files" in out and "fanout: sending over the fabric" in out
    assert "fanout: worker-1 received 4 files from head" in out
    expected = local_sha256(source)
    for node in NODES:
        assert node_sha256(sim_cluster, node) == expected, node
        stored = json.loads(sim_cluster.node_exec(node, "cat", f"{MODEL_PATH}/{weights.MANIFEST_NAME}").stdout)
        assert stored["digest"] == local_digest(source), node
    assert pulumi.outputs()["weights_manifest_digest"] == local_digest(source)


def test_changed_file_previews_sync_and_restart_then_moves_only_that_file(source, pulumi, sim_cluster):
    inodes = node_inodes(sim_cluster, "worker-1")
    containers = pulumi.outputs()["container_ids"]
    (source / "config.json").write_bytes(b'{"model_type": "standin", "revision": 2}\n')

    preview = pulumi("preview").stdout
    assert re.search(r"spark-weights-head\s+replace", preview), preview
    assert re.search(r"spark-weights-workers\s+replace", preview), preview
    assert re.search(r"spark-engine-worker-1\s+replace", preview) and re.search(r"spark-engine-head\s+replace", preview)
    assert "sending" not in preview and "already identical" not in preview  # preview ran nothing

    out = pulumi.up().stdout
    assert "upload to head: sending 1 of 4 files" in out
    assert "fanout: worker-1 needs 1 of 4 files" in out
    after = node_inodes(sim_cluster, "worker-1")
    assert after["config.json"] != inodes["config.json"]
    assert {k: v for k, v in after.items() if k != "config.json"} == {
        k: v for k, v in inodes.items() if k != "config.json"
    }  # the unchanged files were not rewritten
    for node in NODES:
        assert node_sha256(sim_cluster, node) == local_sha256(source), node
    restarted = pulumi.outputs()["container_ids"]
    assert all(restarted[n] != containers[n] for n in NODES)
    assert out.index("fanout: worker-1 verified") < out.index("Container spark-engine-worker-1 created replacement")


def test_second_up_moves_nothing(source, pulumi, sim_cluster):
    out = pulumi.up().stdout
    assert re.search(r"\b\d+ unchanged\b", out) and not re.search(r"\d+ (created|updated|replaced|deleted)", out), out
    assert "sending" not in out and "already identical" not in out  # no weights step ran at all
    pulumi("preview", "--expect-no-changes")


def test_new_key_path_reruns_no_step_and_moves_no_bytes(source, pulumi, sim_cluster, tmp_path):
    """Key rotation (here: the same key at a new path): the steps' connections and ssh commands change, which is
    an update that only says so; no file, image or weights step is re-run or replaced."""
    key = pulumi("config", "get", "sshKeyPath").stdout.strip()
    copy = tmp_path / "rotated_ed25519"
    shutil.copy(key, copy)
    copy.chmod(0o600)
    pulumi.set("sshKeyPath", str(copy))
    try:
        out = pulumi.up().stdout
        assert "connection settings recorded" in out  # the upload's ssh command (key path) is recorded
        assert "sending" not in out and "already identical" not in out
        for line in out.splitlines():
            if any(step in line for step in ("spark-weights-", "spark-image-", "spark-scripts-")):
                assert not any(verb in line for verb in ("creat", "replac", "delet")), line
    finally:
        pulumi.set("sshKeyPath", key)  # the next test's `up` records it again (an update that only says so)


def test_new_revision_in_another_directory_moves_only_the_changed_file(source, pulumi, sim_cluster, tmp_path):
    """ "Changing the model revision": the next revision's directory differs from the last in one file."""
    revision = tmp_path / "revision-2"
    shutil.copytree(source, revision)
    (revision / "tokenizer.json").write_bytes(b'{"vocab": {"a": 0}}\n')
    pulumi("config", "set", "--path", "model.source.path", str(revision))
    try:
        out = pulumi.up().stdout
        assert "upload to head: sending 1 of 4 files" in out and "fanout: worker-1 needs 1 of 4 files" in out
        for node in NODES:
            assert node_sha256(sim_cluster, node) == local_sha256(revision), node
    finally:
        pulumi("config", "set", "--path", "model.source.path", str(source))
    out = pulumi.up().stdout  # back to the first directory: the one file again
    assert "fanout: worker-1 needs 1 of 4 files" in out


def test_deleted_worker_copy_is_drift_that_up_repairs_without_a_restart(source, pulumi, sim_cluster):
    containers = pulumi.outputs()["container_ids"]
    sim_cluster.node_exec("worker-1", "rm", f"{MODEL_PATH}/model-00002-of-00002.safetensors")
    result = pulumi("preview")
    preview = result.stdout + result.stderr
    assert "drift: weights on worker-1: now " in preview, preview
    assert re.search(r"spark-weights-workers\s+replace", preview) and "spark-engine-head" not in preview
    assert "spark-weights-head " not in preview  # only the drifted node's copy
    out = pulumi.up().stdout
    assert "fanout: worker-1 needs 1 of 4 files" in out
    assert node_sha256(sim_cluster, "worker-1") == local_sha256(source)
    assert pulumi.outputs()["container_ids"] == containers


def test_interrupted_copy_resumes_from_the_partial_file(source, pulumi, sim_cluster, tmp_path):
    """An rsync cut short leaves the file's first part in .spark-llm-partial/
    (tests/unit/plan/weights/test_weights_sync.py shows rsync doing so); the next `up` completes it: only the rest
    crosses the fabric."""
    big = os.urandom(3 << 20)
    (source / "model-00003-of-00003.safetensors").write_bytes(big)
    partial = tmp_path / "partial"
    partial.write_bytes(big[: 2 << 20])
    container = sim_cluster.container("worker-1")
    sim_cluster.node_exec("worker-1", "mkdir", "-p", f"{MODEL_PATH}/{weights_sync.PARTIAL_DIR}")
    run(
        [
            "docker",
            "cp",
            str(partial),
            f"{container}:{MODEL_PATH}/{weights_sync.PARTIAL_DIR}/model-00003-of-00003.safetensors",
        ]
    )

    out = pulumi.up().stdout
    literal, matched = sent_line(out, "worker-1")
    assert matched >= (2 << 20) - (64 << 10), out[-3000:]
    assert literal <= (1 << 20) + (64 << 10), out[-3000:]
    assert node_sha256(sim_cluster, "worker-1") == local_sha256(source)
    leftover = sim_cluster.node_exec("worker-1", "ls", "-A", MODEL_PATH).stdout.split()
    assert weights_sync.PARTIAL_DIR not in leftover


def test_destroy_leaves_the_weights_on_every_node(source, pulumi, sim_cluster):
    out = pulumi("destroy", "--yes", "--skip-preview").stdout
    assert "spark-weights-workers deleted" in out
    for node in NODES:
        assert node_sha256(sim_cluster, node) == local_sha256(source), node


def test_purge_on_destroy_removes_the_copies_it_made(source, pulumi, sim_cluster):
    pulumi("config", "set", "--path", "model.purgeOnDestroy", "true")
    try:
        out = pulumi.up().stdout
        assert "deleted by pulumi destroy (model.purgeOnDestroy)" in out
        # The kept copies are reused, not copied again.
        assert "all 5 files already identical" in out and "fanout: worker-1 has all 5 files" in out
        pulumi("destroy", "--yes", "--skip-preview")
        for node in NODES:
            assert sim_cluster.node_exec(node, "test", "-e", MODEL_PATH, check=False).returncode == 1, node
    finally:
        pulumi("config", "set", "--path", "model.purgeOnDestroy", "false")
