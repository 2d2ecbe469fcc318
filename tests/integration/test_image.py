"""EngineImage on the sim: the image starts on the head only, as after `docker load` there by hand (the seeds), and
the worker holds no layer at all (a cold pull).

User stories: `pulumi up` sends the whole image head -> worker in one stream over the fabric (docker save | docker
load), with progress lines, and the group serves; a second `up` moves no bytes; a worker whose image was removed is
found by `preview` and repaired by `up` (moving nothing: the running engine holds the image, untagged); a new image
tag moves only the image and restarts the group in order; an image built on the head FROM that one plus one 20 MiB
layer reaches the worker as about 20 MiB over the fabric (measured on the worker's fabric interface), although the
worker got its layers by `docker load` (docker 20.10 has no registry digest for them), with the head's image ID, and
the group restarts on it and serves; an image that differs only in its config moves no layer; a wrong platform
fails naming the node, and nothing is started.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import urllib.request

import pytest

from tests.integration.conftest import SIM, SIM_IMAGE_TAG, STACK_FILE, complete, run

pytestmark = pytest.mark.integration

NEW_TAG = "spark-llm/standin-engine:sim-v2"
LAYER_TAG = "spark-llm/standin-engine:sim-layer"
CONFIG_TAG = "spark-llm/standin-engine:sim-config"
LAYER_BYTES = 20 * 1024 * 1024
ENGINE = "spark-llm-engine"


def image_id(sim_cluster, node: str, ref: str = SIM_IMAGE_TAG) -> str | None:
    out = sim_cluster.node_exec(node, "docker", "image", "inspect", "-f", "{{.Id}}", ref, check=False)
    return out.stdout.strip() if out.returncode == 0 else None


def engine_ids(sim_cluster) -> dict[str, str]:
    return {
        n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", ENGINE, check=False).stdout.strip()
        for n in ("head", "worker-1")
    }


def arrivals_since(sim_cluster, node: str, since: int) -> list[str]:
    """`docker pull` and `docker load` events on the node since `since` (unix time): one per image that arrived."""
    out = sim_cluster.node_exec(
        node, "docker", "events", "--since", str(since), "--until", str(int(time.time()) + 1),
        "--filter", "type=image", "--filter", "event=pull", "--filter", "event=load", "--format", "{{.Actor.ID}}",
    )  # fmt: skip
    return out.stdout.split()


def completion(outputs: dict) -> dict:
    body = json.dumps({"model": outputs["model"], "prompt": "hello", "max_tokens": 4}).encode()
    request = urllib.request.Request(
        outputs["endpoint"] + "/v1/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        return json.load(response)


@pytest.fixture(scope="module", autouse=True)
def image_on_the_head_only(sim_cluster, pulumi):
    """Start as a user does (the image on the head only, the worker with no image and no layers: a cold pull);
    restore the stack file this module edits."""
    saved = STACK_FILE.read_text()
    sim_cluster.node_exec("head", "docker", "rmi", "-f", NEW_TAG, check=False)
    sim_cluster.node_exec("worker-1", "docker", "rm", "-f", ENGINE, check=False)
    sim_cluster.node_exec("worker-1", "docker", "image", "prune", "-af")
    assert image_id(sim_cluster, "head") and image_id(sim_cluster, "worker-1") is None
    yield
    STACK_FILE.write_text(saved)
    for node in (n["name"] for n in sim_cluster.nodes()):
        sim_cluster.node_exec(node, "docker", "rmi", "-f", NEW_TAG, LAYER_TAG, CONFIG_TAG, check=False)


def test_cold_worker_gets_the_whole_image_in_one_stream_with_progress(pulumi, sim_cluster):
    """From a cluster where only the head has the image, `pulumi up` ends with the same image ID everywhere."""
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
    head, worker = image_id(sim_cluster, "head"), image_id(sim_cluster, "worker-1")
    assert head and head == worker
    outputs = pulumi.outputs()
    assert outputs["image_id"] == head
    assert completion(outputs)["usage"]["completion_tokens"] == 4


def test_state_holds_no_key_material_and_the_env_file_only_encrypted(pulumi, sim_cluster):
    """pulumi-command keeps connections (with the private key) and a secret file's script as secrets."""
    marker = f"sim-env-value-{secrets.token_hex(12)}"
    pulumi.set("engine.env.SPARK_LLM_STATE_PROBE", marker)
    pulumi.up()
    assert marker in sim_cluster.node_exec("head", "cat", "/root/spark-llm/engine.env").stdout
    for node in ("head", "worker-1"):
        mode = sim_cluster.node_exec(node, "stat", "-c", "%a", "/root/spark-llm/engine.env").stdout.strip()
        assert mode == "600", node
    export = pulumi("stack", "export").stdout
    assert "PRIVATE KEY" not in export
    steps = [
        r
        for r in json.loads(export)["deployment"]["resources"]
        if r["urn"].rsplit("::", 1)[-1].startswith(("spark-scripts-", "spark-image-", "spark-weights-"))
    ]
    assert len(steps) >= 12 and marker not in json.dumps(steps)


def test_second_up_moves_no_image_bytes(pulumi, sim_cluster):
    since = int(time.time())
    started = time.monotonic()
    out = pulumi.up().stdout
    print(f"\nno-op pulumi up: {time.monotonic() - started:.1f} s")
    assert re.search(r"\b\d+ unchanged\b", out) and not re.search(r"\d+ (created|updated|replaced|deleted)", out), out
    assert "sending" not in out and "nothing to transfer" not in out  # no image step ran at all
    assert arrivals_since(sim_cluster, "worker-1", since) == []


def test_removed_worker_image_is_announced_by_preview_and_restored_by_up(pulumi, sim_cluster):
    before = engine_ids(sim_cluster)
    expected = image_id(sim_cluster, "head")
    sim_cluster.node_exec("worker-1", "docker", "rmi", "-f", SIM_IMAGE_TAG)

    result = pulumi("preview")
    preview = result.stdout + result.stderr
    assert re.search(r"\+- .*command:remote:Command +spark-image-worker-1 +replace", preview), preview
    assert re.search(r"\+- .*command:remote:Command +spark-image-worker-1-verify +replace", preview), preview
    assert f"drift: image on worker-1: gone (was {expected})" in preview
    assert not re.search(r"spark-image-head\S* +replace", preview)  # the head is as it was
    assert not re.search(r"spark-engine-\S+ +replace", preview)  # the same ID comes back: no restart

    out = pulumi.up().stdout
    # The running engine still holds the image, untagged: it is tagged again, nothing moves.
    assert f"worker-1 holds {expected}, not as {SIM_IMAGE_TAG}: tagged it, sent nothing" in out, out
    assert "docker save | docker load" not in out
    assert image_id(sim_cluster, "worker-1") == expected
    assert engine_ids(sim_cluster) == before
    pulumi("preview", "--expect-no-changes")


def test_new_image_tag_moves_only_the_image_and_restarts_the_group_in_order(pulumi, sim_cluster):
    # A modified stand-in image under another tag, on the head only (as after a local build there).
    head = sim_cluster.container("head")
    sim_cluster.node_exec("head", "docker", "rm", "-f", "spark-llm-v2-build", check=False)
    sim_cluster.node_exec(
        "head", "docker", "run", "--name", "spark-llm-v2-build", SIM_IMAGE_TAG,
        "python3", "-c", "open('/opt/standin/VERSION', 'w').write('v2')",
    )  # fmt: skip
    sim_cluster.node_exec("head", "docker", "commit", "spark-llm-v2-build", NEW_TAG)
    sim_cluster.node_exec("head", "docker", "rm", "spark-llm-v2-build")
    new_id = image_id(sim_cluster, "head", NEW_TAG)
    assert new_id and new_id != image_id(sim_cluster, "head"), head

    pulumi("config", "set", "--path", "spark-llm:image.ref", NEW_TAG)
    out = pulumi.up().stdout
    # Only the image moves: no weights step runs (their resources are not in the update).
    for line in out.splitlines():
        if "spark-weights-" in line:
            assert not any(verb in line for verb in ("updat", "creat", "replac", "delet")), line
    assert image_id(sim_cluster, "worker-1", NEW_TAG) == new_id
    assert pulumi.outputs()["image_id"] == new_id
    order = [
        f"worker-1: sending 1 layers of {NEW_TAG}",  # the image moves while the old group still serves
        "stopped the engine on head",
        "stopped the engine on worker-1",
        "Container spark-engine-worker-1 created replacement",
        "Container spark-engine-head created replacement",
    ]
    positions = [out.find(line) for line in order]
    assert -1 not in positions and positions == sorted(positions), list(zip(order, positions, strict=True))
    for node in ("head", "worker-1"):
        running = sim_cluster.node_exec(node, "docker", "inspect", "-f", "{{.Image}}", ENGINE).stdout.strip()
        assert running == new_id, node
    assert completion(pulumi.outputs())["choices"][0]["text"].strip()


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


def test_wrong_platform_fails_naming_the_node_and_starts_nothing(pulumi, sim_cluster):
    before = engine_ids(sim_cluster)
    pulumi("config", "set", "--path", "spark-llm:image.platform", "linux/arm64")
    out = pulumi.up(check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "head is linux/amd64 (docker info on head), but spark-llm:image.platform is linux/arm64" in text
    assert "stopped the engine" not in text and "Container spark-engine" not in text  # no member touched
    assert engine_ids(sim_cluster) == before  # the running group was left alone
