"""The weights fan-out on 1 head + 2, then 3 workers with the real pulumi CLI: workers relay files to workers,
a corrupted file is found and recopied, a killed copy resumes.

User story: an operator with several boxes runs `pulumi up`; every worker gets the head's weights, and the
workers that already have a file pass it on, so the head does not send every byte N times. A third box joins:
it is filled mostly by the other workers. A bit flips on a worker's disk: preview names the node and `up`
recopies that one file. A copy killed half-way is resumed, not restarted.

And the bigger group itself (folded in from its own module, one deployment of 1 head + 2 workers): the first `up`
starts both workers before the head and the group serves; both workers, holding no image, get it at once, each by
its own `docker save | docker load` from the head; killing the second worker restarts the whole group in order.
With the third worker (a Spark "quad"), SGLang and then vLLM native run four ranks over the fabric, every worker
started before the head, each waiting for rank 0, and the head serves once all joined (the four boxes once, for
the weights and for the engines).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.integration.conftest import SIM, SIM_IMAGE_TAG, Pulumi, SimCluster, complete, run
from tests.integration.profiles import (
    PROFILES,
    assert_profile_logs,
    assert_profile_order,
    assert_replaced_in_order,
)
from tests.waits import StreamReader, wait_for

pytestmark = pytest.mark.integration

MODEL_PATH = "/srv/models/it-fanout"
BIG = 6  # files of 20 MiB (each its own rsync: above fanout.SMALL_FILE), small enough for 2 cores
FILES = BIG + 12 + 1  # and 12 small ones, and config.json
PARTIAL = ".spark-llm-partial"
# scripts/fanout.py prints a progress line per worker every 5 s: the deadline for one, on a loaded machine.
PROGRESS_TIMEOUT_S = 60
PROGRESS = r"weights worker-1: \d+% [\d.]+ [kMG]?B of [\d.]+ [kMG]?B, \d+ MB/s, \d+:\d\d left, from head"


def write_model(sim: SimCluster) -> None:
    script = (
        f"set -e; rm -rf {MODEL_PATH}; mkdir -p {MODEL_PATH}; cd {MODEL_PATH}\n"
        f"for i in $(seq 1 {BIG}); do head -c 20M /dev/urandom > model-0000$i.safetensors; done\n"
        "for i in $(seq 1 12); do head -c 64K /dev/urandom > tok-$i.json; done\n"
        """echo '{"model_type": "standin"}' > config.json\n"""
    )
    sim.node_exec("head", "bash", "-c", script)


def sha256s(sim: SimCluster, node: str) -> dict[str, str]:
    out = sim.node_exec(node, "bash", "-c", f"cd {MODEL_PATH} && sha256sum -- *").stdout
    return {name: digest for digest, name in (line.split(maxsplit=1) for line in out.splitlines())}


def workers(sim: SimCluster) -> list[str]:
    return [n["name"] for n in sim.nodes() if n["role"] == "worker"]


def received(out: str, node: str) -> dict[str, int]:
    """{source: files} from the `fanout: NODE received N files from SOURCE` lines."""
    return {src: int(n) for n, src in re.findall(rf"fanout: {node} received (\d+) files from (\S+)", out)}


def configure(pulumi: Pulumi) -> None:
    pulumi.use_head_weights(MODEL_PATH)  # the test is the head -> workers copy
    pulumi.set("transfer.streams", "2")


@pytest.fixture(scope="module", autouse=True)
def fanout_cluster(sim_cluster: SimCluster, standin_image) -> Iterator[None]:
    sim_cluster.resize(2, standin_image)
    write_model(sim_cluster)
    yield
    run([str(SIM), "link", "off"], check=False)
    for node in ("head", *workers(sim_cluster)):
        sim_cluster.node_exec(node, "rm", "-rf", MODEL_PATH, check=False)
    sim_cluster.resize(1, standin_image)


def image_id(sim: SimCluster, node: str) -> str:
    return sim.node_exec(node, "docker", "image", "inspect", "-f", "{{.Id}}", SIM_IMAGE_TAG).stdout.strip()


def test_two_workers_get_identical_copies_and_the_second_is_fed_by_the_first(pulumi, sim_cluster):
    # Neither worker holds the image: the same `up` sends it to both at once, each from the head.
    for worker in ("worker-1", "worker-2"):
        sim_cluster.node_exec(worker, "docker", "rm", "-f", "spark-llm-engine", check=False)
        sim_cluster.node_exec(worker, "docker", "image", "prune", "-af")
    configure(pulumi)
    out = pulumi.up().stdout
    expected = sha256s(sim_cluster, "head")
    for node in workers(sim_cluster):
        assert sha256s(sim_cluster, node) == expected, node
        assert f"fanout: {node} verified " in out
    # Two streams per node: while the head sends worker-1 its first files, worker-2 waits for worker-1's.
    assert received(out, "worker-2").get("worker-1", 0) > 0, out[-4000:]
    for worker in ("worker-1", "worker-2"):
        assert re.search(rf"{worker} holds none of the image's \d+ layers: sending all of it", out), out
        assert re.search(rf"{worker}: sent \d+ bytes", out), out
        assert image_id(sim_cluster, worker) == image_id(sim_cluster, "head")
    running = sim_cluster.node_exec("head", "sh", "-c", "ps -eo args | grep -c '^docker save' || true")
    assert running.stdout.strip() == "0"  # both steps' docker saves ended
    # Both workers started before the head, and the group of three serves.
    outputs = pulumi.outputs()
    assert outputs["start_order"] == ["worker-1", "worker-2", "head"]
    head_start = sim_cluster.started_at("head")
    assert sim_cluster.started_at("worker-1") < head_start and sim_cluster.started_at("worker-2") < head_start
    assert complete(outputs, "three nodes", 5)["usage"]["completion_tokens"] == 5
    head_log = sim_cluster.node_exec("head", "docker", "logs", "spark-llm-engine").stdout
    assert "node rank 1 joined" in head_log and "node rank 2 joined" in head_log


def test_a_corrupted_file_on_a_worker_is_found_by_the_manifest_and_recopied(pulumi, sim_cluster):
    name = "model-00003.safetensors"
    # Same size, 4 KiB of zeros in the middle: only its content differs.
    sim_cluster.node_exec(
        "worker-2", "dd", "if=/dev/zero", f"of={MODEL_PATH}/{name}", "bs=4096", "seek=100", "count=1", "conv=notrunc"
    )
    result = pulumi("preview")
    preview = result.stdout + result.stderr
    assert "drift: weights on worker-2: now " in preview, preview
    out = pulumi.up().stdout
    assert f"fanout: worker-2 needs 1 of {FILES} files" in out
    assert "fanout: worker-1 has all" in out
    assert sha256s(sim_cluster, "worker-2") == sha256s(sim_cluster, "head")


def test_killing_the_second_worker_restarts_the_whole_group_in_order(pulumi, sim_cluster):
    sim_cluster.node_exec("worker-2", "docker", "rm", "-f", "spark-llm-engine")
    out = pulumi.up().stdout
    # Head stopped, workers removed (the second first), workers created (the first first), head created.
    assert_replaced_in_order(out, ["worker-1", "worker-2"])
    pulumi("preview", "--expect-no-changes")


def test_a_third_worker_gets_its_weights_from_the_workers_too(pulumi, sim_cluster, standin_image):
    sim_cluster.resize(3, standin_image)
    configure(pulumi)
    out = pulumi.up().stdout
    sources = received(out, "worker-3")
    assert sum(sources.values()) == FILES, out[-4000:]
    assert sources.keys() - {"head"}, f"worker-3 got every file from the head: {sources}"
    assert "fanout: worker-1 has all" in out and "fanout: worker-2 has all" in out
    assert sha256s(sim_cluster, "worker-3") == sha256s(sim_cluster, "head")
    # The group of four: SGLang's ranks over the fabric, every worker started before the head.
    assert_four_ranks_serve(pulumi, sim_cluster, "sglang", out)


QUAD = ["worker-1", "worker-2", "worker-3"]


def assert_four_ranks_serve(pulumi: Pulumi, sim_cluster: SimCluster, profile: str, out: str) -> None:
    outputs = pulumi.outputs()
    assert outputs["engine"] == PROFILES[profile][0]
    assert outputs["start_order"] == [*QUAD, "head"]
    assert_profile_order(out, sim_cluster, profile, QUAD)
    assert_profile_logs(sim_cluster, profile, QUAD)
    # Tensor parallelism spans the four nodes (one GPU each on Sparks).
    assert "tp_size=4" in sim_cluster.engine_log("head") and "nnodes=4" in sim_cluster.engine_log("head")
    assert complete(outputs, "four boxes", 5)["usage"]["completion_tokens"] == 5


def test_a_killed_copy_resumes_from_its_partial_file_and_ends_verified(pulumi, sim_cluster):
    for node in workers(sim_cluster):
        sim_cluster.node_exec(node, "bash", "-c", f"rm -f {MODEL_PATH}/model-*")
    # 40 Mbit/s per sending interface: each 20 MiB file takes seconds, so the kill lands mid-file.
    run([str(SIM), "link", "40"])
    proc = pulumi.start_up()
    assert proc.stdout is not None
    output = StreamReader(proc.stdout)

    def alive() -> bool:
        return proc.poll() is None

    def receiving() -> bool:
        """rsync's temp file of the file being received (`.NAME.XXXXXX` in the target directory) is over 1 MiB."""
        assert alive(), f"`pulumi up` ended before worker-1 received anything:\n{output.text()[-3000:]}"
        count = f"find {MODEL_PATH} -maxdepth 1 -name '.model-*' -size +1M | wc -l"
        return int(sim_cluster.node_exec("worker-1", "bash", "-c", count).stdout.strip() or 0) > 0

    try:
        wait_for("worker-1 receiving a file (an rsync temp file over 1 MiB)", receiving, timeout_s=300)
        # A progress line (scripts/fanout.py prints one per worker every 5 s); the capped copy is still far from done.
        output.wait_for_line(PROGRESS, "a progress line of worker-1's copy", timeout_s=PROGRESS_TIMEOUT_S, alive=alive)
        # The head's side of the copy dies at once (a killed `pulumi up` on a flaky laptop looks the same to it).
        sim_cluster.node_exec("head", "pkill", "-9", "-f", "fanout.py")
        sim_cluster.node_exec("head", "pkill", "-9", "-x", "rsync", check=False)
        proc.wait(timeout=300)
        out = output.finish()
    finally:
        if proc.poll() is None:
            proc.kill()
        run([str(SIM), "link", "off"])
    assert proc.returncode != 0, out[-3000:]
    assert re.search(PROGRESS, out), out[-3000:]
    daemons = ("pgrep", "-af", "rsync --daemon")
    for node in workers(sim_cluster):  # the daemons lived only as long as the copy (their ssh session)
        wait_for(
            f"{node}'s rsync daemon (`pgrep -af 'rsync --daemon'`) to end with the copy's ssh session",
            lambda node=node: not sim_cluster.node_exec(node, *daemons, check=False).stdout.strip(),
            timeout_s=10,
        )
    # The receiving daemon moves the partial file aside as its connection drops.
    kept = f"ls -A {MODEL_PATH}/{PARTIAL} 2>/dev/null | wc -l"
    wait_for(
        f"a partial file kept in worker-1's {MODEL_PATH}/{PARTIAL}",
        lambda: int(sim_cluster.node_exec("worker-1", "bash", "-c", kept).stdout.strip()) > 0,
        timeout_s=10,
    )
    out = pulumi.up().stdout
    matched = sum(int(m) for m in re.findall(r"fanout: worker-\d: sent .*matched (\d+) B", out))
    assert matched > 0, out[-4000:]
    for node in workers(sim_cluster):
        assert sha256s(sim_cluster, node) == sha256s(sim_cluster, "head"), node
        leftover = sim_cluster.node_exec(node, "ls", "-A", MODEL_PATH).stdout.split()
        assert PARTIAL not in leftover and not [n for n in leftover if n.startswith(".model-")], leftover


def test_vllm_native_runs_four_ranks_with_every_worker_started_before_the_head(pulumi, sim_cluster):
    configure(pulumi)  # (the sim's config again, with the head's weights: then the profile's keys)
    kind, executor = PROFILES["vllm-native"]
    pulumi.set("engine.kind", kind)
    pulumi.set("engine.executor", executor)
    out = pulumi.up().stdout
    assert_four_ranks_serve(pulumi, sim_cluster, "vllm-native", out)
