"""Deploying one engine profile on the sim and checking what its start order leaves in the logs (test helpers)."""

from __future__ import annotations

import re

from tests.integration.conftest import Pulumi, SimCluster

PROFILES = {
    "sglang": ("sglang", "native"),
    "vllm-native": ("vllm", "native"),
    "vllm-ray": ("vllm", "ray"),
}


def use_profile(pulumi: Pulumi, profile: str) -> None:
    kind, executor = PROFILES[profile]
    pulumi.reset_config()
    pulumi.set("engine.kind", kind)
    pulumi.set("engine.executor", executor)


def launch_lines(out: str) -> list[str]:
    """The nodes in the order `pulumi up` created their engine containers (docker.Container `created` lines)."""
    found = re.findall(r"docker:index:Container spark-engine-(\S+) created(?: replacement)? \(", out)
    return list(dict.fromkeys(found))


def assert_profile_order(out: str, sim_cluster: SimCluster, profile: str, workers: list[str]) -> None:
    """Workers before the head, in the update's log and in the containers' start times; each ran the profile."""
    for node in ["head", *workers]:
        started = [line for line in sim_cluster.engine_log(node).splitlines() if "starting spark-llm-engine" in line]
        assert started and f"profile={profile} " in started[0], (node, started)
    assert launch_lines(out) == [*workers, "head"], out
    head_start = sim_cluster.started_at("head")
    assert all(sim_cluster.started_at(w) < head_start for w in workers)


def assert_profile_logs(sim_cluster: SimCluster, profile: str, workers: list[str]) -> None:
    """What each role's engine log shows for this profile: who waited for whom, and that the group formed."""
    head_log = sim_cluster.engine_log("head")
    for rank, worker in enumerate(workers, start=1):
        log = sim_cluster.engine_log(worker)
        if profile == "sglang":
            assert f"node_rank={rank}" in log and "Init torch distributed begin." in log
            assert "Dummy health check server serving" in log  # ranks > 0 only answer /health
            assert f"node rank {rank} joined" in head_log
        elif profile == "vllm-native":
            assert "headless multiproc executor" in log and "Headless worker is part of the group" in log
            assert f"node rank {rank} joined" in head_log
        else:
            assert "Ray runtime started." in log
            assert f"{rank}={sim_cluster.fabric_address(worker)}" in head_log  # "Ray group ranks: 0=..., 1=..."
    if profile == "vllm-ray":
        # The head counted every node's GPU before `vllm serve` started.
        n = len(workers) + 1
        ready = head_log.index(f"Ray cluster ready: {n} nodes, {n} GPUs: ")
        assert ready < head_log.index("distributed_executor_backend=ray"), head_log
        for node in ["head", *workers]:
            assert f"{sim_cluster.fabric_address(node)} (1 GPU)" in head_log
        assert "Ray group formed" in head_log
    else:
        assert "the group is formed" in head_log


def assert_replaced_in_order(out: str, workers: list[str]) -> None:
    """The group's replacement in an `up` log: head stopped, workers stopped (last rank first), then workers
    created (first rank first), head last; each old container is removed right before its new one is created."""
    order = [
        out.index("spark-engine-stop-head created replacement"),
        *[out.index(f"spark-engine-stop-{w} created replacement") for w in reversed(workers)],
        *[out.index(f"spark-engine-{w} created replacement") for w in workers],
        out.index("spark-engine-head created replacement"),
    ]
    assert order == sorted(order), out


def assert_untouched(out: str, *steps: str) -> None:
    """No resource of these steps (e.g. "spark-weights-") was created, updated, replaced or deleted by the `up`."""
    for line in out.splitlines():
        if any(step in line for step in steps):
            assert not any(verb in line for verb in ("updat", "creat", "replac", "delet")), line


MODEL_PATH = "/srv/models/standin-model"


def weights_on_nodes(sim_cluster: SimCluster) -> dict[str, str]:
    """Inode, size, mtime and ctime of every weights file on every node: a copy or a touch changes them."""
    return {
        node: sim_cluster.node_exec(
            node, "sh", "-c", f"find {MODEL_PATH} -type f -exec stat -c '%n %i %s %Y %Z' {{}} + | sort"
        ).stdout
        for node in ("head", "worker-1")
    }
