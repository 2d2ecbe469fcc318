"""Two operators run `pulumi up` on the same stack at once (issue 10, item 2): the scenario, on any state backend.

The second is refused with Pulumi's lock message before it runs anything; the first completes and serves; the
state and the nodes hold the first operator's change only, and the second operator's retry once the first is done
applies theirs.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.integration.conftest import Pulumi, SimCluster, assert_group_serves

LOCKED = "the stack is currently locked by 1 lock(s)"
# Each rank sleeps this long before forming the group: the first operator's `up` stays busy long enough.
SLOW_START_SECONDS = "20"


def wait_for_lock(up: subprocess.Popen[str], stack_locked: Callable[[], bool], timeout_s: float = 60) -> None:
    """Until the running `pulumi up` holds the stack's lock."""
    deadline = time.monotonic() + timeout_s
    while not stack_locked():
        assert up.poll() is None, up.communicate()
        assert time.monotonic() < deadline, f"the first `pulumi up` took no lock within {timeout_s:.0f} s"
        time.sleep(0.2)


def engine_env(sim_cluster: SimCluster, node: str) -> str:
    return sim_cluster.node_exec(node, "cat", "/root/spark-llm/engine.env").stdout


def engine_containers(sim_cluster: SimCluster, node: str) -> list[str]:
    """Every container on the node (any state) with the engine's name."""
    out = sim_cluster.node_exec(node, "docker", "ps", "--all", "--format", "{{.Names}} {{.State}}").stdout
    return [line for line in out.splitlines() if line.split()[0] == "spark-llm-engine"]


@dataclass(frozen=True)
class TwoOperators:
    """What the scenario measured (seconds) and what the refused operator saw."""

    refused_after: float
    first_took: float
    retry_took: float
    refused_output: str

    def summary(self) -> str:
        took = (self.refused_after, self.first_took, self.retry_took)
        return "refused after {:.1f} s, first up {:.1f} s, retry {:.1f} s".format(*took)


def second_up_is_refused_then_retried(
    deployed: Pulumi, sim_cluster: SimCluster, tmp_path: Path, stack_locked: Callable[[], bool]
) -> TwoOperators:
    """The scenario on deployed's backend; stack_locked tells whether the backend holds a lock of the stack.

    Measures the second `up` until refused, the first `up`, and the second operator's retry.
    """
    history = len(json.loads(deployed("stack", "history", "--json").stdout))
    two = Pulumi(env=deployed.env, config_file=tmp_path / "Pulumi.sim.yaml")
    two.config_file.write_text(deployed.config_file.read_text())
    two.set("engine.env.SPARK_LLM_OPERATOR", "two")
    deployed.set("engine.env.SPARK_LLM_OPERATOR", "one")
    deployed.set("engine.env.STANDIN_SLOW_START_SECONDS", SLOW_START_SECONDS)
    try:
        started = time.monotonic()
        first = deployed.start_up(stderr=subprocess.PIPE)
        wait_for_lock(first, stack_locked)

        asked = time.monotonic()
        second = two.up(check=False)
        refused_after = time.monotonic() - asked
        text = second.stdout + second.stderr
        assert second.returncode != 0, text
        assert LOCKED in text, text
        assert f"(pid {first.pid})" in text  # the lock names who holds it: the first operator's pulumi
        assert "pulumi cancel" in text  # Pulumi's own hint; docs/troubleshooting.md says when (not) to use it
        assert first.poll() is None, "the first `up` should still be running while the second is refused"

        out, err = first.communicate(timeout=900)
        first_took = time.monotonic() - started
        assert first.returncode == 0, out[-4000:] + err[-4000:]
        assert not stack_locked()

        # The state: one more update (the first's), valid and with nothing pending.
        assert len(json.loads(deployed("stack", "history", "--json").stdout)) == history + 1
        deployment = json.loads(deployed("stack", "export").stdout)["deployment"]
        assert not deployment.get("pending_operations")
        assert any(r["type"] == "docker:index/container:Container" for r in deployment["resources"])
        # The nodes: the first operator's change only, one engine container each, and it serves.
        for node in ("head", "worker-1"):
            env = engine_env(sim_cluster, node)
            assert "SPARK_LLM_OPERATOR=one" in env and "SPARK_LLM_OPERATOR=two" not in env, env
        assert_group_serves(deployed, sim_cluster)

        # Recovery: the second operator waits for the first, then retries.
        retried = time.monotonic()
        two.up()
        retry_took = time.monotonic() - retried
        assert "SPARK_LLM_OPERATOR=two" in engine_env(sim_cluster, "head")
        assert_group_serves(two, sim_cluster)
        return TwoOperators(refused_after, first_took, retry_took, refused_output=text)
    finally:
        deployed.reset_config()
