"""A changed image moves only the layers a worker lacks (the registry on the head), and without one the whole image.

User stories: from a worker with no image at all, `pulumi up` pulls the whole image through the head's registry and
the group serves; then an image built on the head FROM that one plus one 20 MiB layer reaches the worker as about
20 MiB over the fabric (measured on the worker's fabric interface), with the head's image ID, and the group restarts
on it and serves. A head without `docker-registry` still gets the image to the worker (docker save | load), saying
what to install.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.integration.conftest import SIM, SIM_IMAGE_TAG, STACK_FILE, complete, run

pytestmark = pytest.mark.integration

LAYER_TAG = "spark-llm/standin-engine:sim-layer"
FALLBACK_TAG = "spark-llm/standin-engine:sim-fallback"
LAYER_BYTES = 20 * 1024 * 1024
REGISTRY = "/usr/bin/docker-registry"


def image_id(sim_cluster, node: str, ref: str) -> str | None:
    out = sim_cluster.node_exec(node, "docker", "image", "inspect", "-f", "{{.Id}}", ref, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def fabric_rx_bytes(sim_cluster, node: str) -> int:
    """Bytes the node's fabric interface received (a worker's only interface is the fabric)."""
    return int(sim_cluster.node_exec(node, "cat", "/sys/class/net/eth0/statistics/rx_bytes").stdout)


def build_on_head(sim_cluster, base: str, tag: str, layer_bytes: int) -> str:
    """`base` plus one layer of `layer_bytes` random bytes, built on the head as an operator would; its ID."""
    sim_cluster.node_exec("head", "docker", "rm", "-f", "spark-llm-layer-build", check=False)
    sim_cluster.node_exec(
        "head", "docker", "run", "--name", "spark-llm-layer-build", base,
        "sh", "-c", f"head -c {layer_bytes} /dev/urandom > /opt/standin/new-layer.bin",
    )  # fmt: skip
    sim_cluster.node_exec("head", "docker", "commit", "spark-llm-layer-build", tag)
    sim_cluster.node_exec("head", "docker", "rm", "spark-llm-layer-build")
    new_id = image_id(sim_cluster, "head", tag)
    assert new_id
    return new_id


@pytest.fixture(scope="module", autouse=True)
def worker_without_any_image(sim_cluster, pulumi):
    """The worker starts with no image and no layers (a cold pull); restore what this module changes."""
    saved = STACK_FILE.read_text()
    sim_cluster.node_exec("worker-1", "docker", "rm", "-f", "spark-llm-engine", check=False)
    sim_cluster.node_exec("worker-1", "docker", "image", "prune", "-af")
    assert image_id(sim_cluster, "worker-1", SIM_IMAGE_TAG) is None
    yield
    STACK_FILE.write_text(saved)
    sim_cluster.node_exec("head", "sh", "-c", f"[ -e {REGISTRY} ] || mv {REGISTRY}.off {REGISTRY}", check=False)
    for node in ("head", "worker-1"):
        sim_cluster.node_exec(node, "docker", "rmi", "-f", LAYER_TAG, FALLBACK_TAG, check=False)


def test_cold_worker_pulls_the_whole_image_through_the_heads_registry(pulumi, sim_cluster):
    # 100 Mbit/s out of the head: the pull takes several seconds, so its progress lines show.
    run([str(SIM), "link", "100", "head"])
    started = time.monotonic()
    try:
        out = pulumi.up().stdout
    finally:
        run([str(SIM), "link", "off"])
    elapsed = time.monotonic() - started
    progress = re.findall(
        r"image worker-1: \d+% [\d.]+ [kMG]?B of at most [\d.]+ [kMG]?B, [\d.]+ [kMG]?B/s, \d+:\d\d left, pulling", out
    )
    assert progress, out
    assert f"worker-1: pushing {SIM_IMAGE_TAG} into a registry on the head" in out
    received = re.search(r"worker-1: received (\d+) bytes in (\d+) s \((\d+) layers; (\d+) it had\)", out)
    assert received, out
    assert int(received.group(4)) == 0  # nothing to reuse
    print(f"\ncold image via registry (head capped at 100 Mbit/s): {int(received.group(1))} bytes received in"
          f" {received.group(2)} s; pulumi up {elapsed:.1f} s")  # fmt: skip
    print("\n".join(progress))
    assert image_id(sim_cluster, "worker-1", SIM_IMAGE_TAG) == image_id(sim_cluster, "head", SIM_IMAGE_TAG)
    assert complete(pulumi.outputs())["usage"]["completion_tokens"] == 4


def test_one_changed_layer_moves_about_one_layer_and_the_group_restarts_on_it(pulumi, sim_cluster):
    new_id = build_on_head(sim_cluster, SIM_IMAGE_TAG, LAYER_TAG, LAYER_BYTES)
    before = {n: sim_cluster.started_at(n) for n in ("head", "worker-1")}
    rx_before = fabric_rx_bytes(sim_cluster, "worker-1")
    pulumi.set("spark-llm:image.ref", LAYER_TAG)
    out = pulumi.up().stdout
    rx = fabric_rx_bytes(sim_cluster, "worker-1") - rx_before
    received = re.search(r"worker-1: received (\d+) bytes in \d+ s \((\d+) layers; (\d+) it had\)", out)
    assert received, out
    print(f"\none changed {LAYER_BYTES}-byte layer: the registry served {received.group(1)} bytes; worker-1's fabric"
          f" interface received {rx} bytes during the whole `pulumi up` ({rx / LAYER_BYTES:.3f}x)")  # fmt: skip
    assert received.group(2) == "1" and int(received.group(3)) > 0  # one layer moved, the others were there
    assert LAYER_BYTES <= int(received.group(1)) <= 1.5 * LAYER_BYTES
    assert rx <= 1.5 * LAYER_BYTES  # everything worker-1 received during the update, measured on its interface
    assert image_id(sim_cluster, "worker-1", LAYER_TAG) == new_id
    assert pulumi.outputs()["image_id"] == new_id
    for node in ("head", "worker-1"):
        assert sim_cluster.started_at(node) > before[node], node  # the group restarted
        running = sim_cluster.node_exec(node, "docker", "inspect", "-f", "{{.Image}}", "spark-llm-engine").stdout
        assert running.strip() == new_id, node
    assert complete(pulumi.outputs())["usage"]["completion_tokens"] == 4


def test_head_without_docker_registry_sends_the_whole_image_and_says_what_to_install(pulumi, sim_cluster):
    new_id = build_on_head(sim_cluster, LAYER_TAG, FALLBACK_TAG, 1024)
    sim_cluster.node_exec("head", "mv", REGISTRY, f"{REGISTRY}.off")
    try:
        pulumi.set("spark-llm:image.ref", FALLBACK_TAG)
        result = pulumi.up()
    finally:
        sim_cluster.node_exec("head", "mv", f"{REGISTRY}.off", REGISTRY)
    text = result.stdout + result.stderr
    assert "warning: docker-registry is not on the head: sending all of" in text, text
    assert "`sudo apt install docker-registry` there makes a changed image move only its new layers" in text
    assert f"worker-1: sending {FALLBACK_TAG}" in text and re.search(r"worker-1: sent \d+ bytes", text)
    assert image_id(sim_cluster, "worker-1", FALLBACK_TAG) == new_id
    assert complete(pulumi.outputs())["usage"]["completion_tokens"] == 4
