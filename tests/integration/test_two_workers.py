"""1 head + 2 workers on the sim: the same program, a bigger group.

User story: a third box joins; `pulumi up` starts both workers before the head and the group serves; killing
one worker restarts the whole group in order. Two workers without the image get it at once, each by its own
docker save | docker load from the head.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.integration.conftest import SIM_IMAGE_TAG, complete
from tests.integration.profiles import assert_replaced_in_order

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def two_workers(sim_cluster, standin_image) -> Iterator[None]:
    sim_cluster.resize(2, standin_image)
    yield
    sim_cluster.resize(1, standin_image)


def image_id(sim_cluster, node: str) -> str:
    return sim_cluster.node_exec(node, "docker", "image", "inspect", "-f", "{{.Id}}", SIM_IMAGE_TAG).stdout.strip()


def test_two_workers_without_the_image_get_it_at_once_from_the_head(pulumi, sim_cluster):
    for worker in ("worker-1", "worker-2"):
        sim_cluster.node_exec(worker, "docker", "rm", "-f", "spark-llm-engine", check=False)
        sim_cluster.node_exec(worker, "docker", "image", "prune", "-af")
    out = pulumi.up().stdout
    for worker in ("worker-1", "worker-2"):
        assert re.search(rf"{worker} holds none of the image's \d+ layers: sending all of it", out), out
        assert re.search(rf"{worker}: sent \d+ bytes", out), out
        assert image_id(sim_cluster, worker) == image_id(sim_cluster, "head")
    running = sim_cluster.node_exec("head", "sh", "-c", "ps -eo args | grep -c '^docker save' || true")
    assert running.stdout.strip() == "0"  # both steps' docker saves ended


def test_both_workers_start_before_the_head_and_the_group_serves(pulumi, sim_cluster):
    pulumi.up()
    outputs = pulumi.outputs()
    assert outputs["start_order"] == ["worker-1", "worker-2", "head"]
    head_start = sim_cluster.started_at("head")
    assert sim_cluster.started_at("worker-1") < head_start and sim_cluster.started_at("worker-2") < head_start
    assert complete(outputs, "three nodes", 5)["usage"]["completion_tokens"] == 5
    head_log = sim_cluster.node_exec("head", "docker", "logs", "spark-llm-engine").stdout
    assert "node rank 1 joined" in head_log and "node rank 2 joined" in head_log


def test_killing_the_second_worker_restarts_the_whole_group_in_order(pulumi, sim_cluster):
    sim_cluster.node_exec("worker-2", "docker", "rm", "-f", "spark-llm-engine")
    out = pulumi.up().stdout
    # Head stopped, workers removed (the second first), workers created (the first first), head created.
    assert_replaced_in_order(out, ["worker-1", "worker-2"])
    pulumi("preview", "--expect-no-changes")
