"""EngineImage on the sim: the image starts on the head only, as after `docker load` there by hand (the seeds).

User stories: `pulumi up` transfers the image head -> worker over the fabric (docker save | docker load, only the
layers the worker lacks; tests/integration/test_image_layers.py counts them) and the group serves; a second `up`
moves no bytes; a worker whose image was removed is found by `preview` and repaired by `up` (moving nothing: the
running engine holds the image, untagged); a new image tag moves only the image and restarts the group in order; a
wrong platform fails naming the node, and nothing is started.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import urllib.request

import pytest

from tests.integration.conftest import SIM_IMAGE_TAG, STACK_FILE

pytestmark = pytest.mark.integration

NEW_TAG = "spark-llm/standin-engine:sim-v2"
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
    """Start as a user does (the image on the head only); restore the stack file this module edits."""
    saved = STACK_FILE.read_text()
    for node in (n["name"] for n in sim_cluster.nodes()):
        tags = [NEW_TAG] if node == "head" else [SIM_IMAGE_TAG, NEW_TAG]
        sim_cluster.node_exec(node, "docker", "rmi", "-f", *tags, check=False)
    assert image_id(sim_cluster, "head") and image_id(sim_cluster, "worker-1") is None
    yield
    STACK_FILE.write_text(saved)
    for node in (n["name"] for n in sim_cluster.nodes()):
        sim_cluster.node_exec(node, "docker", "rmi", "-f", NEW_TAG, check=False)


def test_up_transfers_the_image_from_the_head_and_the_group_serves(pulumi, sim_cluster):
    """From a cluster where only the head has the image, `pulumi up` ends with the same image ID everywhere."""
    out = pulumi.up().stdout
    # An engine left running by an earlier module holds the image untagged: then it is only tagged.
    sent = re.search(r"worker-1: sent (\d+) bytes .*", out)
    assert sent or f"not as {SIM_IMAGE_TAG}: tagged it, sent nothing" in out, out
    print(f"\nimage transfer head -> worker-1: {sent.group(0) if sent else 'tagged, nothing sent'}")
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


def test_wrong_platform_fails_naming_the_node_and_starts_nothing(pulumi, sim_cluster):
    before = engine_ids(sim_cluster)
    pulumi("config", "set", "--path", "spark-llm:image.platform", "linux/arm64")
    out = pulumi.up(check=False)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "head is linux/amd64 (docker info on head), but spark-llm:image.platform is linux/arm64" in text
    assert "stopped the engine" not in text and "Container spark-engine" not in text  # no member touched
    assert engine_ids(sim_cluster) == before  # the running group was left alone
