"""Node faults on the sim (1 head + 1 worker), with the real pulumi CLI: what the operator sees while the fault
lasts, and one `pulumi up` once it is gone.

User stories (issue 10): the Docker engine stopped on a worker; a worker restarted (its containers gone, its
disk kept); the head's sshd down (the jump host: the workers cannot be reached either); the fabric cut during the
weights copy. For each: `pulumi preview` names the node and what is wrong, `pulumi up` fails clearly and touches
nothing while the fault lasts, and one `pulumi up` converges after it: a completion is served, the weights
verified with an unchanged manifest digest, one container per node, workers started before the head.

Each test prints `fault-timing` lines (seconds from command start to its end) for the README and the report.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import REPO, Pulumi, SimCluster, complete, run
from tests.integration.profiles import assert_replaced_in_order

pytestmark = pytest.mark.integration

MANIFEST_TOOL = REPO / "scripts" / "manifest.py"
NODES = ("head", "worker-1")
DOCKERD_WAIT_S = 60


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi) -> Iterator[Pulumi]:
    pulumi.up()
    yield pulumi


def timed(what: str, call):
    """Run `call()`, print how long it took (from command start to its end) and return its result."""
    start = time.monotonic()
    result = call()
    print(f"fault-timing {what}: {time.monotonic() - start:.1f} s")
    return result


def text_of(result) -> str:
    return result.stdout + result.stderr


def assert_no_traceback(text: str) -> None:
    assert "Traceback" not in text and not re.search(r'File ".*(spark_llm|components|__main__)', text), text


def assert_touched_nothing(text: str) -> None:
    """No resource was created, replaced or deleted by a failed `up`."""
    assert not re.search(r"\S+ (created|deleted|replaced)( original| replacement)? \(", text), text


def engine_ids(sim: SimCluster) -> dict[str, str]:
    return {
        n: sim.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", "spark-llm-engine", check=False).stdout.strip()
        for n in NODES
    }


def assert_recovered(pulumi: Pulumi, sim: SimCluster, before: dict) -> None:
    """Served, weights unchanged and verified, one container on every node (the engine: no registry, no daemon)."""
    outputs = pulumi.outputs()
    assert complete(outputs)["usage"]["completion_tokens"] == 4
    assert outputs["weights_manifest_digest"] == before["weights_manifest_digest"]
    path = "/srv/models/standin-model"
    tool = MANIFEST_TOOL.read_text()
    for node in NODES:
        scan = sim.node_exec(node, "bash", "-c", f"python3 - scan {path} --node {node} <<'EOF'\n{tool}\nEOF\n")
        assert before["weights_manifest_digest"] in scan.stdout, (node, scan.stdout)
        running = sim.node_exec(node, "docker", "ps", "--format", "{{.Names}}").stdout.split()
        assert running == ["spark-llm-engine"], (node, running)
    assert sim.started_at("worker-1") < sim.started_at("head")
    pulumi("preview", "--expect-no-changes")


def stop_dockerd(sim: SimCluster, node: str) -> None:
    """`systemctl stop docker`, as far as the sim goes: SIGTERM to the node's dockerd (it stops its containers)."""
    sim.node_exec(node, "pkill", "-TERM", "-x", "dockerd")
    deadline = time.monotonic() + DOCKERD_WAIT_S
    while sim.node_exec(node, "pgrep", "-x", "dockerd", check=False).returncode == 0:
        assert time.monotonic() < deadline, f"dockerd on {node} still runs after {DOCKERD_WAIT_S} s"
        time.sleep(0.5)


def start_dockerd(sim: SimCluster, node: str) -> None:
    """Start the node's dockerd the way the sim's entrypoint does (sim/node/entrypoint.sh), and wait for it."""
    start = (
        "rm -f /run/docker.pid /run/docker/containerd/containerd.pid; "
        "exec setsid dockerd --data-root /var/lib/docker >>/var/log/dockerd.log 2>&1 </dev/null"
    )
    run(["docker", "exec", "-d", sim.container(node), "bash", "-c", start])
    deadline = time.monotonic() + DOCKERD_WAIT_S
    while sim.node_exec(node, "docker", "info", check=False).returncode != 0:
        assert time.monotonic() < deadline, f"dockerd on {node} does not answer after {DOCKERD_WAIT_S} s"
        time.sleep(0.5)


def test_dockerd_stopped_on_a_worker_is_named_up_touches_nothing_and_one_up_converges(deployed, sim_cluster):
    before = deployed.outputs()
    stop_dockerd(sim_cluster, "worker-1")
    try:
        preview = timed("dockerd/preview", lambda: deployed("preview", check=False))
        text = text_of(preview)
        assert "worker-1 cannot be read now: its Docker engine does not answer" in text, text
        assert "Is the docker daemon running?" in text and "sudo systemctl start docker" in text
        assert "has no engine container" not in text and "image on worker-1: gone" not in text
        # With --refresh the docker provider reads first and fails on the worker's own resources.
        refreshed = text_of(timed("dockerd/preview --refresh", lambda: deployed("preview", "--refresh", check=False)))
        assert "spark-engine-worker-1" in refreshed and "Is the docker daemon running?" in refreshed, refreshed
        head_before = engine_ids(sim_cluster)["head"]
        failed = timed("dockerd/up (fails)", lambda: deployed.up(check=False))
        text = text_of(failed)
        assert failed.returncode != 0
        assert "worker-1 cannot be read now: its Docker engine does not answer" in text, text
        assert "Nothing was run on any node (no engine was stopped)" in text
        assert_touched_nothing(text)
        assert_no_traceback(text)
        assert engine_ids(sim_cluster)["head"] == head_before
    finally:
        start_dockerd(sim_cluster, "worker-1")
    out = timed("dockerd/up (recovers)", lambda: deployed.up()).stdout
    assert_replaced_in_order(out, ["worker-1"])
    assert_recovered(deployed, sim_cluster, before)
