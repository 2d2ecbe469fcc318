"""The pure image steps: which node runs what, valid bash, and what each script does against stub nodes.

The stub `docker` answers from files (one set per node), the stub `ssh` runs the fabric command as the worker,
so a rendered script runs here as it would on the head: its messages and the bytes it moves are checked.
tests/integration/test_image.py has the layer-by-layer moves.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan.image import steps as image
from tests.unit.image_stubs import HEAD_ID, OTHER_ID, X86, stub_nodes

TEMPLATE = plan.LAUNCH_TEMPLATE.read_text()
MODES = [("present", "head"), ("pull", "head"), ("transfer", "head"), ("transfer", "operator")]
TOKEN = "tok-1"


def steps(raw, mode="transfer", source="head", platform=None):
    raw["image"] = dict(raw["image"], mode=mode, source=source, **({"platform": platform} if platform else {}))
    return {s.node: s for s in image.image_steps(plan.build_plan(groups(parse(raw))[0], TEMPLATE))}


# ---------- stub nodes ----------


@pytest.fixture
def stub(tmp_path: Path):
    """The stub nodes (tests/unit/image_stubs.py)."""
    return stub_nodes(tmp_path)


# ---------- the table: which node runs which step ----------


@pytest.mark.parametrize(
    ("mode", "source", "worker_runs_on", "head_local"),
    [
        ("present", "head", "spark-2", False),
        ("pull", "head", "spark-2", False),
        ("transfer", "head", "spark-1", False),
        ("transfer", "operator", "spark-1", True),
    ],
)
def test_steps_per_mode_and_source(raw_config, mode, source, worker_runs_on, head_local):
    s = steps(raw_config, mode, source)
    assert list(s) == ["spark-1", "spark-2"]  # the head first: workers compare with its ID
    assert s["spark-1"].runs_on.name == "spark-1" and not s["spark-1"].needs_head_id
    assert s["spark-2"].runs_on.name == worker_runs_on
    assert s["spark-2"].needs_head_id == (mode == "transfer")
    assert s["spark-1"].local == head_local and not s["spark-2"].local


def verify(raw, node: str, expected: str, remote_dir: Path, mode="transfer", source="head") -> str:
    raw["image"] = dict(raw["image"], mode=mode, source=source)
    p = plan.build_plan(groups(parse(raw))[0], TEMPLATE)
    target = dataclasses.replace(next(n for n in p.nodes if n.name == node), remote_dir=str(remote_dir))
    return image.verify_script(p.config, target, expected, TOKEN)


@pytest.mark.parametrize(("mode", "source"), MODES)
@pytest.mark.parametrize("node", ["spark-1", "spark-2"])
@pytest.mark.parametrize("kind", ["script", "verify"])
def test_every_rendered_script_is_valid_bash(raw_config, tmp_path, mode, source, node, kind):
    path = tmp_path / f"{mode}-{source}-{node}-{kind}.sh"
    if kind == "script":
        path.write_text(steps(raw_config, mode, source)[node].script)
    else:
        path.write_text(verify(raw_config, node, HEAD_ID, tmp_path, mode, source))
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck"):
        # SC2034: fabric_ssh_setup also defines FABRIC_RSH (for rsync), which image steps do not use.
        out = subprocess.run(["shellcheck", "-s", "bash", "-e", "SC2034", str(path)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout


# ---------- platform ----------


@pytest.mark.parametrize(("mode", "source"), MODES)
@pytest.mark.parametrize("node", ["spark-1", "spark-2"])
def test_node_of_another_platform_fails_naming_the_node_before_anything_moves(raw_config, stub, mode, source, node):
    (stub.state / "head.info").write_text(X86)
    (stub.state / "worker.info").write_text(X86)
    step = steps(raw_config, mode, source, platform="linux/arm64")[node]
    on = "operator" if step.local else "worker" if step.runs_on.name == "spark-2" else "head"
    out = stub(step.script, node=on)
    assert out.returncode == 1
    assert f"{node} is linux/amd64 (docker info on {node}), but spark-llm:image.platform is linux/arm64" in out.stderr
    assert "DGX Spark is linux/arm64" in out.stderr
    calls = (stub.state / "calls.log").read_text()
    # (a worker's step may have started docker save on the head early: it is stopped unread)
    assert " pull" not in calls and " load" not in calls


def test_image_of_another_platform_fails_naming_the_node_and_what_it_is(raw_config, stub):
    (stub.state / "head.image").write_text(f"{HEAD_ID} linux/amd64\n")
    out = stub(steps(raw_config, "transfer", "head")["spark-1"].script)
    assert out.returncode == 1
    assert "spark-1: image lmsysorg/sglang:spark (sha256:aaa" in out.stderr
    assert "is linux/amd64, but spark-llm:image.platform is linux/arm64" in out.stderr


# ---------- present / pull ----------


def test_present_fails_naming_the_node_that_lacks_the_image(raw_config, stub):
    out = stub(steps(raw_config, "present")["spark-2"].script, node="worker")
    assert out.returncode == 1
    assert "spark-2: image lmsysorg/sglang:spark is not there" in out.stderr
    assert "set spark-llm:image.mode to transfer" in out.stderr


def test_worker_with_another_image_id_than_the_head_fails_naming_both(raw_config, stub, tmp_path):
    (stub.state / "worker.image").write_text(f"{OTHER_ID} linux/arm64\n")
    out = stub(verify(raw_config, "spark-2", HEAD_ID, tmp_path / "remote", mode="present"), node="worker")
    assert out.returncode == 1
    assert "put the head's image on spark-2" in out.stderr
    assert f"spark-2 has lmsysorg/sglang:spark as {OTHER_ID}, but the head has {HEAD_ID}" in out.stderr


def test_present_passes_with_the_image_there_and_prints_it_last(raw_config, stub):
    (stub.state / "worker.image").write_text(f"{HEAD_ID} linux/arm64\n")
    out = stub(steps(raw_config, "present")["spark-2"].script, node="worker")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"


def test_pull_step_only_checks_the_platform_the_provider_pulls(raw_config, stub):
    out = stub(steps(raw_config, "pull")["spark-2"].script, node="worker")
    assert out.returncode == 0, out.stderr
    assert "spark-2 is linux/arm64" in out.stdout
    assert (stub.state / "calls.log").read_text() == "worker docker info --format {{.OSType}}/{{.Architecture}}\n"


# ---------- verify: after the node's RemoteImage, every mode ----------


def test_verify_passes_with_the_expected_id_and_records_the_token(raw_config, stub, tmp_path):
    (stub.state / "worker.image").write_text(f"{HEAD_ID} linux/arm64\n")
    out = stub(verify(raw_config, "spark-2", HEAD_ID, tmp_path / "remote"), node="worker")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"
    # What the next program run compares with the node's live image ID (spark_llm.plan.drift).
    assert (tmp_path / "remote" / "state" / image.DRIFT_STEP).read_text() == f"{TOKEN} {HEAD_ID}\n"


def test_verify_of_a_pulled_worker_with_another_id_fails_naming_both(raw_config, stub, tmp_path):
    (stub.state / "worker.image").write_text(f"{OTHER_ID} linux/arm64\n")
    out = stub(verify(raw_config, "spark-2", HEAD_ID, tmp_path / "remote", mode="pull"), node="worker")
    assert out.returncode == 1
    assert f"spark-2 has lmsysorg/sglang:spark as {OTHER_ID}, but the head has {HEAD_ID}" in out.stderr
    assert "pin a digest" in out.stderr
    assert not (tmp_path / "remote" / "state").exists()  # nothing recorded: the next run repairs


def test_verify_of_an_image_of_another_platform_fails(raw_config, stub, tmp_path):
    (stub.state / "head.image").write_text(f"{HEAD_ID} linux/amd64\n")
    out = stub(verify(raw_config, "spark-1", HEAD_ID, tmp_path / "remote", mode="pull"))
    assert out.returncode == 1
    assert "is linux/amd64, but spark-llm:image.platform is linux/arm64" in out.stderr


@pytest.mark.parametrize(
    ("observed", "expected"),
    [(f"{HEAD_ID} linux/arm64", HEAD_ID), ("", None), ("  ", None)],
)
def test_live_image_id(observed, expected):
    assert image.live_image_id(observed) == expected


# ---------- transfer from the head ----------


def test_transfer_from_the_head_needs_the_image_on_the_head(raw_config, stub):
    (stub.state / "head.image").unlink()
    out = stub(steps(raw_config, "transfer", "head")["spark-1"].script)
    assert out.returncode == 1
    assert "spark-1: image lmsysorg/sglang:spark is not there" in out.stderr
    assert "spark-llm:image.source operator" in out.stderr


def test_a_worker_without_any_layer_gets_the_whole_docker_save(raw_config, stub):
    out = stub(steps(raw_config, "transfer", "head")["spark-2"].script)
    assert out.returncode == 0, out.stderr
    assert "spark-2 holds none of the image's 2 layers: sending all of it" in out.stdout
    assert (stub.state / "worker.loaded").read_bytes() == (stub.state / "head.save.tar").read_bytes()
    assert "spark-2: sending lmsysorg/sglang:spark (123 MB unpacked) from the head over the fabric" in out.stdout
    size = (stub.state / "head.save.tar").stat().st_size
    assert f"spark-2: sent {size} bytes" in out.stdout  # dd's count of what went through
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"


def test_transfer_replaces_a_worker_image_with_another_id(raw_config, stub):
    (stub.state / "worker.image").write_text(f"{OTHER_ID} linux/arm64\n")
    out = stub(steps(raw_config, "transfer", "head")["spark-2"].script)
    assert out.returncode == 0, out.stderr
    assert f"spark-2: {OTHER_ID} linux/arm64; the head has {HEAD_ID}" in out.stdout
    assert (stub.state / "worker.loaded").exists()


def test_worker_with_the_heads_id_moves_no_bytes(raw_config, stub):
    (stub.state / "worker.image").write_text(f"{HEAD_ID} linux/arm64\n")
    out = stub(steps(raw_config, "transfer", "head")["spark-2"].script)
    assert out.returncode == 0, out.stderr
    assert "nothing to transfer" in out.stdout
    calls = (stub.state / "calls.log").read_text()
    # The head starts no docker save: a save stopped unread still writes the whole image once (minutes for 20 GB).
    assert " save" not in calls and " load" not in calls


def test_transfer_refuses_when_the_heads_image_changed_since_the_head_step(raw_config, stub):
    script = image.with_head_id(steps(raw_config, "transfer", "head")["spark-2"].script, OTHER_ID)
    out = stub(script, env={image.HEAD_ID_ENV: ""})
    assert out.returncode == 1
    assert "nothing was sent to spark-2" in out.stderr
    assert not (stub.state / "worker.loaded").exists()


# ---------- transfer from the operator's machine ----------


def test_operators_image_goes_to_the_head_over_ssh_when_the_head_lacks_it(raw_config, stub):
    (stub.state / "head.image").unlink()
    script = steps(raw_config, "transfer", "operator")["spark-1"].script
    out = stub(script, node="operator", env={"LOAD_FROM": "operator"})
    assert out.returncode == 0, out.stderr
    assert (stub.state / "head.loaded").read_text() == "IMAGE-TAR-FROM-operator"
    assert "spark-1: sending lmsysorg/sglang:spark (123 MB unpacked) from this machine (the operator's)" in out.stdout
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"
    assert "ssh head: docker load" in (stub.state / "calls.log").read_text()


def test_head_with_the_operators_image_id_gets_nothing(raw_config, stub):
    script = steps(raw_config, "transfer", "operator")["spark-1"].script
    out = stub(script, node="operator")
    assert out.returncode == 0, out.stderr
    assert "nothing to send" in out.stdout and not (stub.state / "head.loaded").exists()


def test_operators_image_of_another_platform_is_refused_before_sending(raw_config, stub):
    (stub.state / "operator.image").write_text(f"{OTHER_ID} linux/amd64\n")
    out = stub(steps(raw_config, "transfer", "operator")["spark-1"].script, node="operator")
    assert out.returncode == 1
    assert "on this machine (the operator's) is linux/amd64" in out.stderr and "Nothing was sent" in out.stderr
    assert " save" not in (stub.state / "calls.log").read_text()


def test_operators_missing_image_says_what_to_do(raw_config, stub):
    (stub.state / "operator.image").unlink()
    out = stub(steps(raw_config, "transfer", "operator")["spark-1"].script, node="operator")
    assert out.returncode == 1
    assert "is not in this machine's docker" in out.stderr and "image.source head" in out.stderr
