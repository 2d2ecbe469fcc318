"""The simulated dual-Spark cluster (sim/sim) gives the deploy tests the seeds' topology.

A head the operator reaches over ssh on the management network, workers reachable only through the head
over the internal fabric network, a Docker engine in every node, host keys pinned in Pulumi.sim.yaml.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import SIM, SIM_DIR, STACK_FILE

pytestmark = pytest.mark.integration

STATE_DIR = SIM_DIR
SSH_CONFIG = STATE_DIR / "ssh_config"
KNOWN_HOSTS = STATE_DIR / "known_hosts"
OPERATOR_KEY = STATE_DIR / "id_ed25519"

# Long enough for a cold node image build (debootstrap) on a fresh machine.
SIM_UP_TIMEOUT_S = 900


def run(cmd: list[str], *, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and result.returncode != 0:
        raise AssertionError(f"{cmd} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def sim(*args: str) -> subprocess.CompletedProcess[str]:
    return run([str(SIM), *args], timeout=SIM_UP_TIMEOUT_S)


def stack_nodes() -> list[dict[str, Any]]:
    return yaml.safe_load(STACK_FILE.read_text())["config"]["spark-llm:nodes"]


def pinned_ssh(host: str, *remote: str, known_hosts: Path = KNOWN_HOSTS) -> subprocess.CompletedProcess[str]:
    """ssh straight from the host, with only the given known_hosts trusted."""
    return run(
        [
            "ssh",
            "-i",
            str(OPERATOR_KEY),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={known_hosts}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "ConnectTimeout=5",
            f"root@{host}",
            *remote,
        ],
        check=False,
    )


def node_ssh(node: str, *remote: str) -> str:
    """ssh by node name with .sim/ssh_config (workers through the head); the command's stdout."""
    return run(["ssh", "-F", str(SSH_CONFIG), "-o", "BatchMode=yes", node, *remote]).stdout


def container_ids(names: list[str]) -> dict[str, str]:
    return {name: run(["docker", "inspect", "--format", "{{.Id}}", name]).stdout.strip() for name in names}


@dataclass
class Cluster:
    head: dict[str, Any]
    workers: list[dict[str, Any]]
    prefix: str


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    created = not (STATE_DIR / "state.json").exists()
    sim("up", "--workers", "1")
    nodes = stack_nodes()
    prefix = json.loads((STATE_DIR / "state.json").read_text())["prefix"]
    yield Cluster(
        head=next(n for n in nodes if n["role"] == "head"),
        workers=[n for n in nodes if n["role"] == "worker"],
        prefix=prefix,
    )
    if created:
        sim("down")


def test_head_answers_ssh_with_its_pinned_host_key_and_a_wrong_pin_is_refused(cluster: Cluster, tmp_path: Path):
    """As an operator, I ssh to the head on its management address and the host key pinned in
    Pulumi.sim.yaml (read from the container itself) is what the head presents; a different pin is refused."""
    actual = run(["docker", "exec", f"{cluster.prefix}-head", "cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout
    assert cluster.head["hostKey"] == " ".join(actual.split()[:2])

    answer = pinned_ssh(cluster.head["host"], "hostname")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == "head"

    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")])
    impostor = " ".join((tmp_path / "impostor.pub").read_text().split()[:2])
    wrong_pins = tmp_path / "known_hosts"
    wrong_pins.write_text(f"{cluster.head['host']} {impostor}\n")
    refused = pinned_ssh(cluster.head["host"], "hostname", known_hosts=wrong_pins)
    assert refused.returncode == 255
    assert "Host key verification failed" in refused.stderr


def test_worker_is_reachable_only_through_the_head(cluster: Cluster):
    """As an operator, I cannot reach a worker from my machine (it sits on the fabric only), but I can
    through the head as a jump host, exactly as with the real Sparks."""
    worker = cluster.workers[0]
    assert worker["via"] == "head"
    assert worker["host"] == worker["fabricAddress"]

    networks = json.loads(
        run(
            ["docker", "inspect", "--format", "{{json .NetworkSettings.Networks}}", f"{cluster.prefix}-worker-1"]
        ).stdout
    )
    assert sorted(networks) == [f"{cluster.prefix}-fabric"], "the worker must have no management address"

    # No route from the host to the fabric: checked before any packet is sent, so nothing can leave
    # this machine through its default route.
    route = run(["ip", "route", "get", worker["host"]], check=False)
    assert route.returncode != 0, f"the host has a route to the worker: {route.stdout}"

    direct = pinned_ssh(worker["host"], "hostname")
    assert direct.returncode == 255

    jumped = run(
        ["ssh", "-F", str(SSH_CONFIG), "-o", "BatchMode=yes", "-J", "head", f"root@{worker['host']}", "hostname"]
    )
    assert jumped.stdout.strip() == "worker-1"


def test_every_node_runs_its_own_docker_engine(cluster: Cluster):
    """As the deploy program, I find a Docker engine on every node over ssh, to run the LLM engine in."""
    for node in [cluster.head, *cluster.workers]:
        version = node_ssh(node["name"], "docker", "info", "--format", "{{.ServerVersion}}").strip()
        assert version, f"{node['name']}: docker info printed no server version"


def test_file_rsynced_head_to_worker_over_the_fabric_arrives_intact(cluster: Cluster):
    """As the deploy program, I copy model files from the head to a worker with rsync over the fabric
    link (the head's own ssh key and pinned worker host key), and they arrive byte-identical."""
    worker = cluster.workers[0]
    path = "/tmp/sim-test-rsync.bin"
    route = node_ssh("head", "ip", "-o", "route", "get", worker["fabricAddress"])
    assert f"src {cluster.head['fabricAddress']}" in route, f"head reaches the worker off the fabric: {route}"
    try:
        sent = node_ssh("head", f"head -c 16M /dev/urandom > {path} && sha256sum {path}").split()[0]
        rsync = ["rsync", "-a", "-e", "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes"]
        node_ssh("head", shlex.join([*rsync, path, f"root@{worker['fabricAddress']}:{path}"]))
        received = node_ssh(worker["name"], "sha256sum", path).split()[0]
        assert received == sent
    finally:
        node_ssh("head", "rm", "-f", path)
        node_ssh(worker["name"], "rm", "-f", path)


def test_up_with_two_workers_twice_is_idempotent(cluster: Cluster):
    """As a developer, I scale the sim to two workers; running the same `sim up` again keeps the same
    containers, and Pulumi.sim.yaml lists both workers with distinct fabric addresses."""
    head_and_first = [f"{cluster.prefix}-head", f"{cluster.prefix}-worker-1"]
    before = container_ids(head_and_first)
    all_three = [*head_and_first, f"{cluster.prefix}-worker-2"]
    try:
        sim("up", "--workers", "2")
        first = container_ids(all_three)
        first_stack = STACK_FILE.read_text()
        sim("up", "--workers", "2")
        assert container_ids(all_three) == first
        assert {name: first[name] for name in head_and_first} == before
        assert STACK_FILE.read_text() == first_stack

        workers = [n for n in stack_nodes() if n["role"] == "worker"]
        assert [w["name"] for w in workers] == ["worker-1", "worker-2"]
        fabric = [w["fabricAddress"] for w in workers] + [cluster.head["fabricAddress"]]
        assert len(set(fabric)) == 3
        assert all(w["via"] == "head" for w in workers)
        assert node_ssh("worker-2", "hostname").strip() == "worker-2"
    finally:
        sim("up", "--workers", "1")
    assert [n["name"] for n in stack_nodes()] == ["head", "worker-1"]


def test_nodes_restarted_at_once_keep_their_addresses_and_host_keys(cluster: Cluster):
    """As a developer, I restart every node container at once, the worker first (issue 31, 12): each comes back with
    the address Pulumi.sim.yaml gives it (Docker picked them before, and two nodes swapped theirs), so the pinned
    host keys still hold and the worker is reached through the head as before."""
    containers = [f"{cluster.prefix}-head", f"{cluster.prefix}-worker-1"]
    run(["docker", "stop", "--time", "1", *containers], timeout=120)
    run(["docker", "start", containers[1]])
    run(["docker", "start", containers[0]])
    for node in [cluster.head, *cluster.workers]:
        container = f"{cluster.prefix}-{node['name']}"
        addresses = run(["docker", "inspect", "--format", "{{json .NetworkSettings.Networks}}", container]).stdout
        fabric = json.loads(addresses)[f"{cluster.prefix}-fabric"]["IPAddress"]
        assert fabric == node["fabricAddress"], node["name"]
    # sshd comes back within seconds; `sim up` waits for it the same way (its own deadline).
    sim("up", "--workers", "1")
    assert node_ssh("worker-1", "hostname").strip() == "worker-1"
    assert [n["fabricAddress"] for n in stack_nodes()] == [
        cluster.head["fabricAddress"],
        cluster.workers[0]["fabricAddress"],
    ]
