"""Each engine profile deployed on the sim (1 head + 1 worker) with the real pulumi CLI.

User stories: the same stack serves with SGLang, vLLM native (headless workers) and vLLM on Ray (what finally
worked in the seeds), each started in its own order; switching engines restarts the group and moves no
weights; a worker that crashes at init is reported by `pulumi up` with that worker's own log lines (not a stack of
ours), whichever engine runs (with Ray the crash surfaces in the head's log: the error must still name the worker).
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest

from spark_llm.config import engine_flags
from spark_llm.config.metric_catalog import Role, load_metrics
from tests.integration.conftest import complete
from tests.integration.profiles import (
    PROFILES,
    assert_profile_logs,
    assert_profile_order,
    assert_replaced_in_order,
    assert_untouched,
    use_profile,
    weights_on_nodes,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("profile", list(PROFILES))
def test_each_profile_serves_a_completion_in_its_start_order_and_a_switch_to_it_moves_no_weights(
    pulumi, sim_cluster, profile
):
    """The profiles in turn on one stack: the first from nothing, each next one a switch of engine (SGLang to vLLM
    native, then to vLLM on Ray) that preview announces, that restarts the group in order and moves no weights."""
    switch = bool(pulumi.outputs())  # a deployment is there: this profile replaces the one before
    weights = weights_on_nodes(sim_cluster) if switch else {}
    digest = pulumi.outputs()["weights_manifest_digest"] if switch else None
    use_profile(pulumi, profile)
    if switch:
        preview = pulumi("preview").stdout
        assert "spark-engine-worker-1 replace" in preview and "spark-engine-head replace" in preview
    out = pulumi.up().stdout
    outputs = pulumi.outputs()
    assert outputs["engine"] == PROFILES[profile][0]
    assert outputs["start_order"] == ["worker-1", "head"]
    assert_profile_order(out, sim_cluster, profile, ["worker-1"])
    assert_profile_logs(sim_cluster, profile, ["worker-1"])
    if switch:
        assert_replaced_in_order(out, ["worker-1"])
        # The weights steps did not run and not one file on any node was rewritten or touched.
        assert_untouched(out, "spark-weights-")
        assert weights_on_nodes(sim_cluster) == weights
        assert outputs["weights_manifest_digest"] == digest
    assert complete(outputs, "Two DGX Sparks", 6)["usage"]["completion_tokens"] == 6
    assert_engine_metrics(outputs, profile)


def assert_engine_metrics(outputs: dict, profile: str) -> None:
    """The deployed engine's /metrics: vLLM serves its release's metrics (the image carries the metric catalogs),
    and the completion above is counted; SGLang serves none without --enable-metrics, as the real one."""
    try:
        with urllib.request.urlopen(outputs["endpoint"] + "/metrics", timeout=10) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as error:
        assert PROFILES[profile][0] == "sglang" and error.code == 404, error
        return
    catalog = load_metrics("vllm", engine_flags.newest_version("vllm"))
    families = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    assert families == {m.family for m in catalog.served()}
    generated = catalog.metric(Role.GENERATION_TOKENS).samples[0]
    counted = [line for line in text.splitlines() if line.startswith(generated + "{")]
    assert counted and float(counted[0].rsplit(" ", 1)[1]) >= 6, counted


@pytest.mark.parametrize("profile", list(PROFILES))
def test_a_worker_crash_at_init_is_reported_with_that_workers_log_lines(pulumi, sim_cluster, profile):
    use_profile(pulumi, profile)
    pulumi.set("engine.env.STANDIN_CRASH_AT_INIT", "1")
    # The product's grace (the sim's is 1 s): the worker's watch, not the gate, must see its crash.
    pulumi.set("timeouts.startupGraceSeconds", "5")
    try:
        failed = pulumi.up(check=False)
    finally:
        pulumi.reset_config()
    assert failed.returncode != 0
    text = failed.stdout + failed.stderr
    assert "STANDIN_CRASH_AT_INIT selects node rank 1" in text, text
    if profile == "vllm-ray":
        # The worker's container (its Ray node) runs on; its actor's traceback reaches the head's log, tagged
        # with the worker's address, and the error points at the worker.
        worker_ip = sim_cluster.fabric_address("worker-1")
        assert f"head's log carries lines from worker-1 (ip={worker_ip})" in text
        assert f"ip={worker_ip}" in text.split("---- head (head): last")[1]
    else:
        # The worker's own container stopped within the startup grace: a failed start like any other (issue 31, 5):
        # the worker named first, its lines in the error, a failure record, and the way back.
        assert "spark-llm: the engine on worker-1 stopped within the startup grace" in text
        assert "worker-1 (worker): engine container is exited (exit code 1) while the group was starting" in text, text[
            -6000:
        ]
        assert "---- worker-1 (worker): last 30 lines ----" in text
        assert "init_torch_distributed" in text  # the worker's own traceback is in the error
        assert "spark-llm rollback --stack" in text
    # The error is the worker's log (whose own Python traceback is expected), not a stack from our program or from
    # Pulumi's Python SDK.
    assert not re.search(r'File ".*(spark_llm|components|__main__|pulumi)[^"]*"', text), text
    assert "KeyboardInterrupt" not in text
