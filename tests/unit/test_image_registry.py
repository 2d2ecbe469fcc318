"""A worker's image step with `docker-registry` on the head: the image moves through a registry there, layer by layer.

Against the stub nodes (tests/unit/image_stubs.py): which commands run where (push into 127.0.0.1 on the head, pull
on the worker through `ssh -R`, retag), what the step prints, that the registry is stopped and its storage
collected, and what happens when a port is taken or the push fails.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from spark_llm.config import parse
from spark_llm.plan import deployment as plan
from spark_llm.plan import image, image_registry
from tests.unit.image_stubs import HEAD_ID, MANIFEST_DIGEST, MANIFEST_SIZES, OTHER_ID, stub_nodes

TEMPLATE = plan.TEMPLATE_PATH.read_text()
REF = "lmsysorg/sglang:spark"


@pytest.fixture
def stub(tmp_path: Path):
    return stub_nodes(tmp_path, registry=True)


def worker_step(raw) -> str:
    raw["image"] = dict(raw["image"], mode="transfer", source="head")
    steps = {s.node: s for s in image.image_steps(plan.build_plan(parse(raw), TEMPLATE))}
    return steps["spark-2"].script


def calls(stub) -> str:
    return (stub.state / "calls.log").read_text()


def registry_root(stub) -> Path:
    return stub.home / ".cache" / "spark-llm" / "registry"


def registry_stopped(stub) -> bool:
    """Every registry the step started has exited (the stub's pids; a zombie counts as exited)."""
    pids = (stub.state / "registry.pids").read_text().split()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = [p for p in pids if Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text()]
        if not alive:
            return True
        time.sleep(0.1)
    return False


def test_worker_pulls_the_heads_image_through_a_registry_on_the_head(raw_config, stub):
    out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    log = calls(stub)
    push = re.search(r"head docker push 127\.0\.0\.1:(\d+)/spark-llm/engine:(\w+)", log)
    assert push and push.group(2) == HEAD_ID.removeprefix("sha256:")  # the tag names the image ID
    tunnel = re.search(r"tunnel (\d+):127\.0\.0\.1:(\d+)", log)
    assert tunnel and tunnel.group(2) == push.group(1)  # the worker's port leads to the head's registry
    pulled = f"127.0.0.1:{tunnel.group(1)}/spark-llm/engine@{MANIFEST_DIGEST}"  # by digest: checked by docker
    assert f"worker docker pull {pulled}" in log
    assert f"worker docker tag {pulled} {REF}" in log and f"worker docker rmi {pulled}" in log
    assert " save" not in log and " load" not in log
    assert (stub.state / "worker.image").read_text() == f"{HEAD_ID} linux/arm64\n"
    assert "spark-2: pushing lmsysorg/sglang:spark into a registry on the head (only the layers it lacks)" in out.stdout
    assert "spark-2: the registry took 1 new layers" in out.stdout and "had 1" in out.stdout
    assert re.search(r"spark-2: received \d+ bytes in \d+ s \(1 layers; 1 it had\)", out.stdout)
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"
    assert registry_stopped(stub)


def test_registry_listens_on_loopback_only_and_stores_under_the_users_cache(raw_config, stub):
    script = worker_step(raw_config)
    # The config the step writes (the stub registry reads addr from it).
    assert "'http:' \"  addr: 127.0.0.1:$registry_port\"" in script
    assert 'REGISTRY_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/spark-llm/registry"' in script
    assert stub(script).returncode == 0
    assert registry_root(stub).stat().st_mode & 0o777 == 0o700


def test_the_full_docker_output_is_kept_on_the_head(raw_config, stub, tmp_path):
    # The head's remote_dir (the login user's ~/spark-llm), redirected here.
    script = worker_step(raw_config).replace("LOG_DIR='/home/aurora/spark-llm/logs'", f"LOG_DIR='{tmp_path}/logs'")
    assert stub(script).returncode == 0
    kept = (tmp_path / "logs" / "image-spark-2.log").read_text()
    assert "l2: Pushed" in kept and "l2: Pull complete" in kept


def test_storage_keeps_only_the_current_image_and_is_collected(raw_config, stub):
    tags = registry_root(stub) / "docker/registry/v2/repositories/spark-llm/engine/_manifests/tags"
    (tags / "0123old").mkdir(parents=True)
    (tags / HEAD_ID.removeprefix("sha256:")).mkdir()
    assert stub(worker_step(raw_config)).returncode == 0
    assert sorted(p.name for p in tags.iterdir()) == [HEAD_ID.removeprefix("sha256:")]
    assert re.search(r"head docker-registry garbage-collect --delete-untagged \S+/config.yml", calls(stub))


def test_no_collection_while_another_steps_registry_runs(raw_config, stub):
    root = registry_root(stub)
    root.mkdir(parents=True)
    with open(root / ".in-use.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # what a concurrent worker's step holds
        out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    assert "garbage-collect" not in calls(stub)


def test_a_taken_port_on_the_head_is_tried_again(raw_config, stub):
    (stub.state / "registry.busy").touch()
    out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    assert calls(stub).count("docker-registry serve") == 2


def test_a_taken_port_on_the_worker_is_tried_again(raw_config, stub):
    (stub.state / "forward.fails").touch()
    out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    assert (stub.state / "worker.image").read_text() == f"{HEAD_ID} linux/arm64\n"


def test_failed_push_says_so_sends_nothing_and_stops_the_registry(raw_config, stub):
    (stub.state / "push.fails").touch()
    out = stub(worker_step(raw_config))
    assert out.returncode == 1
    assert "received unexpected HTTP status: 500" in out.stderr
    assert "spark-2: docker push into the registry on the head failed" in out.stderr
    assert "nothing was sent to spark-2" in out.stderr
    assert " pull" not in calls(stub) and not (stub.state / "worker.image").exists()
    assert registry_stopped(stub)


def test_a_killed_step_leaves_no_registry_running(raw_config, stub, tmp_path):
    """SIGKILL (no trap runs): the registry's watchdog stops it within seconds."""
    (stub.state / "push.slow").touch()
    script = tmp_path / "killed.sh"
    script.write_text(worker_step(raw_config))
    env = stub.env()  # type: ignore[attr-defined]
    with subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as step:
        deadline = time.monotonic() + 10
        while not (stub.state / "push.started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (stub.state / "push.started").exists()
        step.kill()
    assert registry_stopped(stub)


def test_worker_with_the_heads_id_starts_no_registry(raw_config, stub):
    (stub.state / "worker.image").write_text(f"{HEAD_ID} linux/arm64\n")
    out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    assert "nothing to transfer" in out.stdout
    assert "docker-registry" not in calls(stub) and " push" not in calls(stub)


def test_worker_with_another_image_gets_the_heads(raw_config, stub):
    (stub.state / "worker.image").write_text(f"{OTHER_ID} linux/arm64\n")
    out = stub(worker_step(raw_config))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == f"image {HEAD_ID} linux/arm64"


# ---------- progress lines ----------


def progress(*args: str) -> str:
    script = "NODE=worker-1\n" + image_registry.PROGRESS_FUNCTIONS + 'progress_line "$@"\n'
    out = subprocess.run(["bash", "-c", script, "progress", *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("pulling from the registry on the head", "12000000", "4", "51001500", "at most"),
            "image worker-1: 23% 12.0 MB of at most 51.0 MB, 3.0 MB/s, 0:13 left, pulling from the registry on the"
            " head",
        ),
        (
            ("docker save | docker load over the fabric", "1500000000", "100", "123000000000"),
            "image worker-1: 1% 1.5 GB of about 123.0 GB, 15.0 MB/s, 135:00 left, docker save | docker load over the"
            " fabric",
        ),
        (("pushing", "21069014", "2"), "image worker-1: 21.0 MB, 10.5 MB/s, pushing"),
        (("pulling", "0", "3", "50", "at most"), "image worker-1: 0% 0 B of at most 50 B, 0 B/s, ?:?? left, pulling"),
        (("pushing", "0", "0"), "image worker-1: 0 B, 0 B/s, pushing"),
        (
            ("pulling", "60", "1", "50", "at most"),
            "image worker-1: 100% 60 B of at most 50 B, 60 B/s, all sent, pulling",
        ),
    ],
)
def test_progress_line(args, line):
    assert progress(*args) == line


def test_the_pull_reports_the_manifests_size_as_the_most_it_can_fetch(raw_config, stub):
    """manifest_bytes reads the pushed manifest from the registry's storage: config + layers, compressed."""
    script = worker_step(raw_config).split("HEAD_IMAGE_ID=${")[0]
    script += 'mkdir -p "$REGISTRY_ROOT"; STUB_NODE=head docker push x:1/y:t >/dev/null\n'
    script += f"manifest_bytes {MANIFEST_DIGEST}\n"
    out = stub(script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(sum(MANIFEST_SIZES))


def test_install_hint_names_the_package():
    assert image_registry.INSTALL_HINT == "sudo apt install docker-registry"
    assert os.path.basename(image_registry.REGISTRY_BINARY) == "docker-registry"
