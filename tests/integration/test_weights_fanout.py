"""The weights fan-out on 1 head + 2, then 3 workers with the real pulumi CLI: workers relay files to workers,
a corrupted file is found and recopied, a killed copy resumes.

User story: an operator with several boxes runs `pulumi up`; every worker gets the head's weights, and the
workers that already have a file pass it on, so the head does not send every byte N times. A third box joins:
it is filled mostly by the other workers. A bit flips on a worker's disk: preview names the node and `up`
recopies that one file. A copy killed half-way is resumed, not restarted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import SIM, Pulumi, SimCluster, run

pytestmark = pytest.mark.integration

MODEL_PATH = "/srv/models/it-fanout"
BIG = 6  # files of 20 MiB (each its own rsync: above fanout.SMALL_FILE), small enough for 2 cores
FILES = BIG + 12 + 1  # and 12 small ones, and config.json
PARTIAL = ".spark-llm-partial"
PROGRESS_WAIT = 6  # s: scripts/fanout.py prints a progress line per worker every 5 s


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


def test_two_workers_get_identical_copies_and_the_second_is_fed_by_the_first(pulumi, sim_cluster):
    configure(pulumi)
    out = pulumi.up().stdout
    expected = sha256s(sim_cluster, "head")
    for node in workers(sim_cluster):
        assert sha256s(sim_cluster, node) == expected, node
        assert f"fanout: {node} verified " in out
    # Two streams per node: while the head sends worker-1 its first files, worker-2 waits for worker-1's.
    assert received(out, "worker-2").get("worker-1", 0) > 0, out[-4000:]


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


def test_a_third_worker_gets_its_weights_from_the_workers_too(pulumi, sim_cluster, standin_image):
    sim_cluster.resize(3, standin_image)
    configure(pulumi)
    out = pulumi.up().stdout
    sources = received(out, "worker-3")
    assert sum(sources.values()) == FILES, out[-4000:]
    assert sources.keys() - {"head"}, f"worker-3 got every file from the head: {sources}"
    assert "fanout: worker-1 has all" in out and "fanout: worker-2 has all" in out
    assert sha256s(sim_cluster, "worker-3") == sha256s(sim_cluster, "head")


def test_a_killed_copy_resumes_from_its_partial_file_and_ends_verified(pulumi, sim_cluster):
    for node in workers(sim_cluster):
        sim_cluster.node_exec(node, "bash", "-c", f"rm -f {MODEL_PATH}/model-*")
    # 40 Mbit/s per sending interface: each 20 MiB file takes seconds, so the kill lands mid-file.
    run([str(SIM), "link", "40"])
    proc = pulumi.start_up()
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            # rsync's temp file of the file being received: `.NAME.XXXXXX` in the target directory.
            sizes = sim_cluster.node_exec(
                "worker-1", "bash", "-c", f"find {MODEL_PATH} -maxdepth 1 -name '.model-*' -size +1M | wc -l"
            ).stdout
            if int(sizes.strip() or 0) > 0:
                break
            time.sleep(0.5)
        else:
            pytest.fail("no file was being received after 300 s")
        time.sleep(PROGRESS_WAIT)  # long enough for a progress line; the capped copy is still far from done
        # The head's side of the copy dies at once (a killed `pulumi up` on a flaky laptop looks the same to it).
        sim_cluster.node_exec("head", "pkill", "-9", "-f", "fanout.py")
        sim_cluster.node_exec("head", "pkill", "-9", "-x", "rsync", check=False)
        out = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
        run([str(SIM), "link", "off"])
    assert proc.returncode != 0, out[-3000:]
    assert re.search(
        r"weights worker-1: \d+% [\d.]+ [kMG]?B of [\d.]+ [kMG]?B, \d+ MB/s, \d+:\d\d left, from head", out
    ), out[-3000:]
    time.sleep(1)  # the receiving daemon moves the partial file aside as its connection drops
    for node in workers(sim_cluster):  # the daemons lived only as long as the copy (their ssh session)
        deadline = time.monotonic() + 10
        while daemons := sim_cluster.node_exec(node, "pgrep", "-af", "rsync --daemon", check=False).stdout.strip():
            assert time.monotonic() < deadline, f"{node}: rsync daemon left running: {daemons}"
            time.sleep(0.5)
    kept = sim_cluster.node_exec("worker-1", "bash", "-c", f"ls -A {MODEL_PATH}/{PARTIAL} 2>/dev/null | wc -l").stdout
    assert int(kept.strip()) > 0, "no partial file was kept"
    out = pulumi.up().stdout
    matched = sum(int(m) for m in re.findall(r"fanout: worker-\d: sent .*matched (\d+) B", out))
    assert matched > 0, out[-4000:]
    for node in workers(sim_cluster):
        assert sha256s(sim_cluster, node) == sha256s(sim_cluster, "head"), node
        leftover = sim_cluster.node_exec(node, "ls", "-A", MODEL_PATH).stdout.split()
        assert PARTIAL not in leftover and not [n for n in leftover if n.startswith(".model-")], leftover
