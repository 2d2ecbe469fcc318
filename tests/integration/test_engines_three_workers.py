"""SGLang and vLLM native on 1 head + 3 workers: four ranks over the fabric, every worker started before the head.

User story: a group of four boxes (a Spark "quad") runs the same stack; the worker ranks follow the node list,
each waits for rank 0, and the head serves once all of them joined.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.conftest import complete
from tests.integration.profiles import PROFILES, assert_profile_logs, assert_profile_order, use_profile

pytestmark = pytest.mark.integration

WORKERS = ["worker-1", "worker-2", "worker-3"]


@pytest.fixture(scope="module", autouse=True)
def three_workers(sim_cluster, standin_image) -> Iterator[None]:
    sim_cluster.resize(3, standin_image)
    yield
    sim_cluster.resize(1, standin_image)


@pytest.mark.parametrize("profile", ["sglang", "vllm-native"])
def test_four_ranks_serve_with_every_worker_started_before_the_head(pulumi, sim_cluster, profile):
    use_profile(pulumi, profile)
    out = pulumi.up().stdout
    outputs = pulumi.outputs()
    assert outputs["engine"] == PROFILES[profile][0]
    assert outputs["start_order"] == [*WORKERS, "head"]
    assert_profile_order(out, sim_cluster, profile, WORKERS)
    assert_profile_logs(sim_cluster, profile, WORKERS)
    # Tensor parallelism spans the four nodes (one GPU each on Sparks).
    assert "tp_size=4" in sim_cluster.engine_log("head") and "nnodes=4" in sim_cluster.engine_log("head")
    assert complete(outputs, "four boxes", 5)["usage"]["completion_tokens"] == 5
