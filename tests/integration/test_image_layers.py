"""A worker with no layer of the image gets all of it by docker save | docker load; a changed image moves only the
layers the worker lacks.

User stories: from a worker with no image at all, `pulumi up` sends the whole image in one stream, with progress
lines, and the group serves; then an image built on the head FROM that one plus one 20 MiB layer reaches the worker
as about 20 MiB over the fabric (measured on the worker's fabric interface), although the worker got its layers by
`docker load` (docker 20.10 has no registry digest for them), with the head's image ID, and the group restarts on it
and serves. An image that differs only in its config moves no layer.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.integration.conftest import SIM, SIM_IMAGE_TAG, STACK_FILE, complete, run

pytestmark = pytest.mark.integration

LAYER_TAG = "spark-llm/standin-engine:sim-layer"
CONFIG_TAG = "spark-llm/standin-engine:sim-config"
LAYER_BYTES = 20 * 1024 * 1024


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
    for node in ("head", "worker-1"):
        sim_cluster.node_exec(node, "docker", "rmi", "-f", LAYER_TAG, CONFIG_TAG, check=False)


def test_cold_worker_gets_the_whole_image_in_one_stream_with_progress(pulumi, sim_cluster):
    # 100 Mbit/s out of the head: the transfer takes several seconds, so its progress lines show.
    run([str(SIM), "link", "100", "head"])
    started = time.monotonic()
    try:
        out = pulumi.up().stdout
    finally:
        run([str(SIM), "link", "off"])
    elapsed = time.monotonic() - started
    progress = re.findall(
        r"image worker-1: \d+% [\d.]+ [kMG]?B of about [\d.]+ [kMG]?B, [\d.]+ [kMG]?B/s, (?:\d+:\d\d left|all sent),"
        r" docker save \| docker load over the fabric",
        out,
    )
    assert progress, out
    assert "worker-1 holds none of the image's 1 layers: sending all of it" in out
    sent = re.search(r"worker-1: sent (\d+) bytes .* copied, ([\d.]+) s", out)
    assert sent, out
    print(f"\ncold image (head capped at 100 Mbit/s): {int(sent.group(1))} bytes sent in {sent.group(2)} s;"
          f" pulumi up {elapsed:.1f} s")  # fmt: skip
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
    assert "worker-1 holds 1 of the image's 2 layers: sending the other 1" in out, out
    sent = re.search(r"worker-1: sent (\d+) bytes", out)
    assert sent, out
    print(f"\none changed {LAYER_BYTES}-byte layer: the step sent {sent.group(1)} bytes; worker-1's fabric"
          f" interface received {rx} bytes during the whole `pulumi up` ({rx / LAYER_BYTES:.3f}x)")  # fmt: skip
    assert LAYER_BYTES <= int(sent.group(1)) <= 1.5 * LAYER_BYTES
    assert rx <= 1.5 * LAYER_BYTES  # everything worker-1 received during the update, measured on its interface
    assert image_id(sim_cluster, "worker-1", LAYER_TAG) == new_id
    assert pulumi.outputs()["image_id"] == new_id
    for node in ("head", "worker-1"):
        assert sim_cluster.started_at(node) > before[node], node  # the group restarted
        running = sim_cluster.node_exec(node, "docker", "inspect", "-f", "{{.Image}}", "spark-llm-engine").stdout
        assert running.strip() == new_id, node
    assert complete(pulumi.outputs())["usage"]["completion_tokens"] == 4


def test_an_image_that_differs_only_in_its_config_moves_no_layer(pulumi, sim_cluster):
    sim_cluster.node_exec("head", "docker", "rm", "-f", "spark-llm-config-build", check=False)
    sim_cluster.node_exec("head", "docker", "create", "--name", "spark-llm-config-build", LAYER_TAG)
    sim_cluster.node_exec(
        "head", "docker", "commit", "--change", "ENV SPARK_LLM_CONFIG_ONLY=1", "spark-llm-config-build", CONFIG_TAG
    )
    sim_cluster.node_exec("head", "docker", "rm", "spark-llm-config-build")
    new_id = image_id(sim_cluster, "head", CONFIG_TAG)
    # docker commit of an unchanged container still adds an (empty) layer: the worker lacks only that one.
    layers = sim_cluster.node_exec(
        "head", "docker", "image", "inspect", "-f", "{{len .RootFS.Layers}}", CONFIG_TAG
    ).stdout.strip()
    pulumi.set("spark-llm:image.ref", CONFIG_TAG)
    out = pulumi.up().stdout
    assert re.search(rf"worker-1 holds \d+ of the image's {layers} layers: sending the other [01]\b", out), out
    sent = re.search(r"worker-1: sent (\d+) bytes", out)
    assert sent and int(sent.group(1)) < 100_000, out
    assert image_id(sim_cluster, "worker-1", CONFIG_TAG) == new_id
    assert complete(pulumi.outputs())["usage"]["completion_tokens"] == 4
