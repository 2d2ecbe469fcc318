"""A worker's disk too small for the weights, or filling up during the copy, with the real pulumi CLI.

User story: the model directory on a worker sits on a disk that cannot take the weights. `pulumi up` says so
before a byte moves, naming the node, the path, the bytes needed and free, and touches nothing on the head. When
the disk fills during the copy (someone else's files), the error says the same; once space is freed, the next
`pulumi up` sends only what is still missing and the group serves.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import SIM, Pulumi, SimCluster, assert_group_serves, run

pytestmark = pytest.mark.integration

DISK = "/srv/models/it-disk"  # a small tmpfs on worker-1, a plain directory on the head
MODEL_PATH = f"{DISK}/model"
BIG, BIG_MIB = 6, 20
FILES = BIG + 1


def head_files(sim: SimCluster) -> str:
    """Name, size, mtime and sha256 of every file of the head's model: what must not change."""
    script = f"cd {MODEL_PATH} && stat -c '%n %s %Y' -- * && sha256sum -- *"
    return sim.node_exec("head", "bash", "-c", script).stdout


def mount_disk(sim: SimCluster, mib: int) -> None:
    sim.node_exec("worker-1", "bash", "-c", f"umount -l {DISK} 2>/dev/null; mkdir -p {DISK}")
    sim.node_exec("worker-1", "mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", DISK)


def configure(pulumi: Pulumi) -> None:
    pulumi.use_head_weights(MODEL_PATH)
    pulumi.set("transfer.streams", "1")


@pytest.fixture(scope="module", autouse=True)
def small_disk(sim_cluster: SimCluster) -> Iterator[None]:
    script = (
        f"set -e; rm -rf {DISK}; mkdir -p {MODEL_PATH}; cd {MODEL_PATH}\n"
        f"for i in $(seq 1 {BIG}); do head -c {BIG_MIB}M /dev/urandom > model-0000$i.safetensors; done\n"
        """echo '{"model_type": "standin"}' > config.json\n"""
    )
    sim_cluster.node_exec("head", "bash", "-c", script)
    yield
    run([str(SIM), "link", "off"], check=False)
    sim_cluster.node_exec("worker-1", "bash", "-c", f"umount -l {DISK}; rm -rf {DISK}", check=False)
    sim_cluster.node_exec("head", "rm", "-rf", DISK, check=False)


def test_a_worker_disk_too_small_is_refused_before_anything_moves(pulumi, sim_cluster):
    mount_disk(sim_cluster, 64)  # the weights are 120 MiB
    before = head_files(sim_cluster)
    configure(pulumi)
    result = pulumi.up(check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    needed = re.search(rf"worker-1: {MODEL_PATH} needs [\d.]+ MB \((\d+) B\), [\d.]+ MB \((\d+) B\) free", out)
    assert needed, out[-3000:]
    assert int(needed[1]) >= BIG * BIG_MIB << 20 and int(needed[2]) <= 64 << 20
    assert "nothing was copied" in out and "Traceback" not in out
    copied = sim_cluster.node_exec("worker-1", "bash", "-c", f"ls -A {MODEL_PATH} | grep -c model- || true").stdout
    assert copied.strip() == "0"
    assert head_files(sim_cluster) == before


def test_a_disk_filling_during_the_copy_is_named_and_the_copy_resumes_once_space_is_freed(pulumi, sim_cluster):
    mount_disk(sim_cluster, 200)
    before = head_files(sim_cluster)
    configure(pulumi)
    run([str(SIM), "link", "40"])  # 5 MB/s: the copy takes about 25 s, long enough to fill the disk mid-way
    proc = pulumi.start_up()
    try:
        deadline = time.monotonic() + 300
        done = "0"
        while time.monotonic() < deadline:
            done = sim_cluster.node_exec(
                "worker-1", "bash", "-c", f"ls {MODEL_PATH} 2>/dev/null | grep -c '^model-' || true"
            ).stdout.strip()
            if int(done) >= 2:
                break
            time.sleep(0.5)
        else:
            pytest.fail("worker-1 had not received 2 files after 300 s")
        # Another program takes every free byte of the disk.
        sim_cluster.node_exec("worker-1", "bash", "-c", f"dd if=/dev/zero of={DISK}/filler bs=1M 2>/dev/null || true")
        out = proc.communicate(timeout=300)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
        run([str(SIM), "link", "off"])
    assert proc.returncode != 0, out[-3000:]
    assert re.search(
        rf"worker-1: the disk under {MODEL_PATH} is full \(No space left on device\) with [\d.]+ MB \(\d+ B\) of the"
        r" weights still to come; [\d.]+ [kM]?B \(\d+ B\) free there now",
        out,
    ), out[-3000:]
    assert "Traceback" not in out
    assert head_files(sim_cluster) == before

    sim_cluster.node_exec("worker-1", "rm", f"{DISK}/filler")
    out = pulumi.up().stdout
    needs = re.search(rf"fanout: worker-1 needs (\d+) of {FILES} files", out)
    assert needs and int(needs[1]) <= FILES - 2, out[-3000:]  # the files that made it are not sent again
    assert "fanout: worker-1 verified " in out
    worker = sim_cluster.node_exec("worker-1", "bash", "-c", f"cd {MODEL_PATH} && sha256sum -- *").stdout
    assert sorted(worker.splitlines()) == sorted(line for line in before.splitlines() if len(line.split()) == 2)
    assert_group_serves(pulumi, sim_cluster)
