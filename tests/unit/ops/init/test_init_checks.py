"""What init refuses to write a stack for: each problem one line, naming the node and the fix."""

from __future__ import annotations

import pytest

from spark_llm.ops.init.checks import Reach, problems
from tests.unit.ops.init.spark_sections import spark


def pair(**worker: object) -> dict:
    return {"spark-4a2b": spark(), "spark-77c1": spark("192.168.100.11", fabric="192.168.100.11/24", **worker)}


def test_two_good_sparks_have_no_problem():
    assert problems(pair(), [Reach("spark-77c1", "192.168.100.11", True)], gpus=True) == []


@pytest.mark.parametrize(
    ("worker", "reaches", "expected"),
    [
        ({"mtu": 1500}, [], "the fabric MTUs differ (spark-4a2b enp1s0f1np1 9000, spark-77c1 enp1s0f1np1 1500)"),
        ({"state": "1: DOWN"}, [], "spark-77c1 (192.168.100.11) has no ACTIVE RoCE port with an IPv4 address"),
        (
            {"extra_addrs": "2: enP7s7    inet 192.168.100.50/24 scope global enP7s7"},
            [],
            "enP7s7 (192.168.100.50/24) and enp1s0f1np1 (192.168.100.11/24) are in one subnet",
        ),
        ({"gpu": ""}, [], "spark-77c1 (192.168.100.11): nvidia-smi shows no GPU"),
        ({"runtimes": '{"runc":{"path":"runc"}}'}, [], "Docker has no NVIDIA runtime (runc): install"),
        (
            {},
            [Reach("spark-77c1", "192.168.100.11", False, "100% packet loss")],
            "spark-77c1's fabric address 192.168.100.11 does not answer the head over the fabric (100% packet loss)",
        ),
    ],
    ids=["mtu", "no-active-port", "one-subnet", "no-gpu", "no-nvidia-runtime", "unreachable"],
)
def test_each_problem_is_named_with_its_node_and_fix(worker, reaches, expected):
    found = problems(pair(**worker), reaches, gpus=True)
    assert len(found) == 1 and expected in found[0], found


def test_without_gpus_the_sim_needs_no_gpu_and_no_nvidia_runtime():
    assert problems(pair(gpu="", runtimes='{"runc":{}}'), [], gpus=False) == []


def test_the_image_must_be_where_the_mode_reads_it():
    nodes = pair(image=("Error: No such image", 1))
    nodes["spark-4a2b"] = spark(image=("sha256:1", 0))
    assert problems(nodes, [], gpus=True, image="vllm:x", image_on="head") == []
    (found,) = problems(nodes, [], gpus=True, image="vllm:x", image_on="every node")
    assert found.startswith("spark-77c1 (192.168.100.11): the image vllm:x is not there")
    assert problems(nodes, [], gpus=True, image="vllm:x", image_on="") == []  # pulled by each node
