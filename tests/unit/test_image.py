"""The pure image steps: which node runs what, valid bash, and what each script does against stub nodes.

The stub `docker` answers from files (one set per node), the stub `ssh` runs the fabric command as the worker,
so a rendered script runs here as it would on the head: its messages and the bytes it moves are checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from spark_llm import image, plan
from spark_llm.config import parse
from spark_llm.ssh import FEED_PROBE_ENV, FEED_REQUEST, stdin_script

TEMPLATE = plan.TEMPLATE_PATH.read_text()
MODES = [("present", "head"), ("pull", "head"), ("transfer", "head"), ("transfer", "operator")]
HEAD_ID = "sha256:" + "a" * 64
OTHER_ID = "sha256:" + "b" * 64
ARM = "linux/aarch64"  # what `docker info` says on a DGX Spark
X86 = "linux/x86_64"


def steps(raw, mode="transfer", source="head", platform=None):
    raw["image"] = dict(raw["image"], mode=mode, source=source, **({"platform": platform} if platform else {}))
    return {s.node: s for s in image.image_steps(plan.build_plan(parse(raw), TEMPLATE))}


# ---------- stub nodes ----------

DOCKER_STUB = r"""#!/usr/bin/env bash
# docker as seen on node $STUB_NODE (default head): answers from $STUB/<node>.{info,image}
set -euo pipefail
node=${STUB_NODE:-head}
echo "$node docker $*" >>"$STUB/calls.log"
case "$1" in
  info) cat "$STUB/$node.info" ;;
  image)
    fmt=$4
    [ -f "$STUB/$node.image" ] || { echo "Error: No such image: $5" >&2; exit 1; }
    read -r id platform <"$STUB/$node.image"
    case "$fmt" in
      *Size*) echo 123000000 ;;
      '{{.Id}}') echo "$id" ;;
      *) echo "$id ${platform%%/*}/${platform#*/}" ;;
    esac ;;
  pull)
    if [ -f "$STUB/$node.pull" ]; then cp "$STUB/$node.pull" "$STUB/$node.image"; echo "pulled $4"; exit 0; fi
    echo "Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup failed" >&2
    exit 1 ;;
  save) printf 'IMAGE-TAR-FROM-%s' "$node" ;;
  load) cat >"$STUB/$node.loaded"; cp "$STUB/head.image" "$STUB/$node.image"; echo "Loaded image" ;;
  *) echo "stub docker: unexpected $*" >&2; exit 2 ;;
esac
"""

# ssh -i KEY -o ... -p PORT user@host COMMAND: runs COMMAND as the worker, as ssh would (one string, a shell).
SSH_STUB = r"""#!/usr/bin/env bash
set -euo pipefail
while [ $# -gt 0 ]; do
  case "$1" in
    -i | -o | -p) shift 2 ;;
    *) break ;;
  esac
done
shift  # user@host
echo "ssh worker: $*" >>"$STUB/calls.log"
STUB_NODE=worker exec bash -c "$*"
"""


@pytest.fixture
def stub(tmp_path: Path):
    """A head and a worker, both arm64, the head with the image; returns a function running a script."""
    bin_dir, state, home = tmp_path / "bin", tmp_path / "state", tmp_path / "home"
    for d in (bin_dir, state, home / ".ssh"):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("fabric key\n")
    for name, text in (("docker", DOCKER_STUB), ("ssh", SSH_STUB), ("sleep", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (state / "head.info").write_text(ARM + "\n")
    (state / "worker.info").write_text(ARM + "\n")
    (state / "head.image").write_text(f"{HEAD_ID} linux/arm64\n")
    (state / "calls.log").write_text("")

    def run(script: str, *, node: str = "head", stdin: bytes = b"", env: dict | None = None, wrap: bool = False):
        path = tmp_path / "step.sh"
        path.write_text(script)
        environment = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HOME": str(home),
            "STUB": str(state),
            "STUB_NODE": node,
            image.HEAD_ID_ENV: HEAD_ID,
            **(env or {}),
        }
        argv, data = (["bash", "-s"], stdin_script(script).encode() + stdin) if wrap else (["bash", str(path)], stdin)
        result = subprocess.run(argv, input=data, capture_output=True, env=environment, timeout=30)
        return subprocess.CompletedProcess(argv, result.returncode, result.stdout.decode(), result.stderr.decode())

    run.state = state  # type: ignore[attr-defined]
    return run


# ---------- the table: which node runs which step ----------


@pytest.mark.parametrize(
    ("mode", "source", "worker_runs_on", "head_feed"),
    [
        ("present", "head", "spark-2", False),
        ("pull", "head", "spark-2", False),
        ("transfer", "head", "spark-1", False),
        ("transfer", "operator", "spark-1", True),
    ],
)
def test_steps_per_mode_and_source(raw_config, mode, source, worker_runs_on, head_feed):
    s = steps(raw_config, mode, source)
    assert list(s) == ["spark-1", "spark-2"]  # the head first: workers compare with its ID
    assert s["spark-1"].runs_on.name == "spark-1" and not s["spark-1"].head_id_env
    assert s["spark-2"].runs_on.name == worker_runs_on and s["spark-2"].head_id_env
    assert (s["spark-1"].feed is not None) == head_feed and s["spark-2"].feed is None


@pytest.mark.parametrize(("mode", "source"), MODES)
@pytest.mark.parametrize("node", ["spark-1", "spark-2"])
@pytest.mark.parametrize("kind", ["script", "check"])
def test_every_rendered_script_is_valid_bash(raw_config, tmp_path, mode, source, node, kind):
    path = tmp_path / f"{mode}-{source}-{node}-{kind}.sh"
    path.write_text(getattr(steps(raw_config, mode, source)[node], kind))
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
    on = "worker" if step.runs_on.name == "spark-2" else "head"
    out = stub(step.script, node=on, env={FEED_PROBE_ENV: f"{HEAD_ID} linux/arm64"})
    assert out.returncode == 1
    assert f"{node} is linux/amd64 (docker info on {node}), but spark-llm:image.platform is linux/arm64" in out.stderr
    assert "DGX Spark is linux/arm64" in out.stderr
    calls = (stub.state / "calls.log").read_text()
    assert " save" not in calls and " pull" not in calls and " load" not in calls


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


def test_worker_with_another_image_id_than_the_head_fails_naming_both(raw_config, stub):
    (stub.state / "worker.image").write_text(f"{OTHER_ID} linux/arm64\n")
    out = stub(steps(raw_config, "present")["spark-2"].script, node="worker")
    assert out.returncode == 1
    assert f"spark-2 has lmsysorg/sglang:spark as {OTHER_ID}, but the head has {HEAD_ID}" in out.stderr


def test_present_passes_with_the_heads_id_and_prints_it_last(raw_config, stub):
    (stub.state / "worker.image").write_text(f"{HEAD_ID} linux/arm64\n")
    out = stub(steps(raw_config, "present")["spark-2"].script, node="worker")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"
    assert image.parse_image_id(out.stdout) == HEAD_ID


def test_pull_runs_docker_pull_with_the_platform(raw_config, stub):
    (stub.state / "worker.pull").write_text(f"{HEAD_ID} linux/arm64\n")
    out = stub(steps(raw_config, "pull")["spark-2"].script, node="worker")
    assert out.returncode == 0, out.stderr
    assert "worker docker pull --platform linux/arm64 lmsysorg/sglang:spark" in (stub.state / "calls.log").read_text()


def test_pull_failure_says_the_node_cannot_reach_the_registry_and_what_to_do(raw_config, stub):
    out = stub(steps(raw_config, "pull")["spark-2"].script, node="worker")
    assert out.returncode == 1
    assert "dial tcp" in out.stderr  # docker's own reason stays visible
    assert "spark-2: docker pull --platform linux/arm64 lmsysorg/sglang:spark failed" in out.stderr
    assert "docker login on spark-2" in out.stderr and "spark-llm:image.mode transfer" in out.stderr


# ---------- transfer from the head ----------


def test_transfer_from_the_head_needs_the_image_on_the_head(raw_config, stub):
    (stub.state / "head.image").unlink()
    out = stub(steps(raw_config, "transfer", "head")["spark-1"].script)
    assert out.returncode == 1
    assert "spark-1: image lmsysorg/sglang:spark is not there" in out.stderr
    assert "spark-llm:image.source operator" in out.stderr


def test_transfer_sends_docker_save_over_the_fabric_to_a_worker_that_lacks_it(raw_config, stub):
    out = stub(steps(raw_config, "transfer", "head")["spark-2"].script)
    assert out.returncode == 0, out.stderr
    assert (stub.state / "worker.loaded").read_text() == "IMAGE-TAR-FROM-head"
    assert "spark-2: sending lmsysorg/sglang:spark (123 MB unpacked) from the head over the fabric" in out.stdout
    assert "spark-2: sent 19 bytes" in out.stdout  # dd's count of what went through
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
    assert " save" not in calls and " load" not in calls


def test_transfer_refuses_when_the_heads_image_changed_since_the_head_step(raw_config, stub):
    out = stub(steps(raw_config, "transfer", "head")["spark-2"].script, env={image.HEAD_ID_ENV: OTHER_ID})
    assert out.returncode == 1
    assert "nothing was sent to spark-2" in out.stderr
    assert not (stub.state / "worker.loaded").exists()


# ---------- transfer from the operator's machine ----------


def test_head_asks_for_the_operators_image_and_loads_exactly_the_bytes_that_follow(raw_config, stub):
    (stub.state / "head.image").unlink()
    script = steps(raw_config, "transfer", "operator")["spark-1"].script
    # docker load on the stub head copies head.image: give it the operator's facts once loaded.
    (stub.state / "incoming").write_text(f"{HEAD_ID} linux/arm64\n")
    docker = Path(stub.state.parent / "bin" / "docker")
    docker.write_text(docker.read_text().replace('cp "$STUB/head.image"', 'cp "$STUB/incoming"'))
    out = stub(script, stdin=b"TAR-BYTES\nexit 3\n", env={FEED_PROBE_ENV: f"{HEAD_ID} linux/arm64"}, wrap=True)
    assert out.returncode == 0, out.stderr
    assert FEED_REQUEST in out.stdout.splitlines()
    assert (stub.state / "head.loaded").read_bytes() == b"TAR-BYTES\nexit 3\n"  # data, never run as script
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"


def test_head_with_the_operators_image_id_asks_for_nothing(raw_config, stub):
    script = steps(raw_config, "transfer", "operator")["spark-1"].script
    out = stub(script, env={FEED_PROBE_ENV: f"{HEAD_ID} linux/arm64"}, wrap=True)
    assert out.returncode == 0, out.stderr
    assert FEED_REQUEST not in out.stdout and "nothing to send" in out.stdout


def test_operators_image_of_another_platform_is_refused_before_sending(raw_config, stub):
    script = steps(raw_config, "transfer", "operator")["spark-1"].script
    out = stub(script, env={FEED_PROBE_ENV: f"{OTHER_ID} linux/amd64"}, wrap=True)
    assert out.returncode == 1
    assert "on this machine (the operator's) is linux/amd64" in out.stderr and "Nothing was sent" in out.stderr
    assert FEED_REQUEST not in out.stdout


def test_bytes_after_a_script_that_does_not_read_them_are_never_run(tmp_path):
    marker = tmp_path / "ran"
    script = "echo script ran\n"
    data = f"touch {marker}\n".encode()
    out = subprocess.run(["bash", "-s"], input=stdin_script(script).encode() + data, capture_output=True)
    assert out.returncode == 0 and out.stdout == b"script ran\n"
    assert not marker.exists()


# ---------- the read-only check ----------


@pytest.mark.parametrize(
    ("mode", "source", "absent"),
    [
        ("present", "head", "absent (mode present: put it on spark-2)"),
        ("pull", "head", "absent (pulumi up pulls it)"),
        ("transfer", "head", "absent (pulumi up transfers it from the head)"),
    ],
)
def test_check_says_absent_and_what_up_will_do(raw_config, stub, mode, source, absent):
    step = steps(raw_config, mode, source)["spark-2"]
    out = stub(step.check, node="head" if step.runs_on.name == "spark-1" else "worker")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == absent


def test_check_prints_the_workers_id_and_platform(raw_config, stub):
    (stub.state / "worker.image").write_text(f"{HEAD_ID} linux/arm64\n")
    out = stub(steps(raw_config, "transfer", "head")["spark-2"].check)
    assert out.stdout.strip() == f"{HEAD_ID} linux/arm64"


def test_unreachable_worker_is_unknown_not_absent(raw_config, stub):
    ssh = stub.state.parent / "bin" / "ssh"
    ssh.write_text("#!/bin/sh\necho 'ssh: connect to host 192.168.200.13 port 22: No route to host' >&2\nexit 255\n")
    out = stub(steps(raw_config, "transfer", "head")["spark-2"].check)
    assert out.stdout.strip() == "unknown: ssh: connect to host 192.168.200.13 port 22: No route to host"


def test_check_is_read_only(raw_config):
    for mode, source in MODES:
        for step in steps(raw_config, mode, source).values():
            for verb in ("docker pull", "docker load", "docker save", "docker rmi", "docker tag"):
                assert verb not in step.check, (mode, source, step.node, verb)


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        (f"Loaded image\nimage {HEAD_ID} linux/arm64\n", HEAD_ID),
        ("", ""),
        (None, ""),
        ("image\n", ""),
    ],
)
def test_parse_image_id(stdout, expected):
    assert image.parse_image_id(stdout) == expected
