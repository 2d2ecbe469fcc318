"""Two states of one stack on one sim: two checkouts, each on its own file backend (Pulumi's default per-checkout
state), or a state kept aside while another one deployed. Whatever one state did to the nodes, the other's
`pulumi preview` says what its `up` will do, `up` does it, and `destroy` finishes.

Regression (issue 14): after one state's `destroy`, the other's preview and up said "29 unchanged" and "not
running on any node yet", and started nothing: the tokens a node had lost computed the very values the state
saved when it first deployed. `up --refresh` then recreated containers over launch files that no longer existed,
docker made directories in their place, and `up` and `destroy` both failed on them ("Is a directory").
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from tests.integration.conftest import Pulumi, SimCluster, assert_group_serves, backend_env, run, sim_stack

pytestmark = pytest.mark.integration

LAUNCH_FILES = ["/root/spark-llm/launch.sh", "/root/spark-llm/engine.env"]


@pytest.fixture(scope="module")
def two_states(sim_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pulumi, Pulumi]]:
    with ExitStack() as stack:
        clis = []
        for name in ("checkout-b", "checkout-a"):
            backend = tmp_path_factory.mktemp(name)
            clis.append(stack.enter_context(sim_stack(backend_env(backend), backend)))
        yield clis[0], clis[1]


def engine_ids(sim: SimCluster) -> dict[str, str]:
    return {
        n["name"]: sim.node_exec(n["name"], "docker", "inspect", "-f", "{{.Id}}", "spark-llm-engine").stdout.strip()
        for n in sim.nodes()
    }


def spark_llm_status(cli: Pulumi) -> dict:
    argv = [
        sys.executable,
        "-m",
        "spark_llm.ops.cli",
        "status",
        "--stack",
        "sim",
        "--config-file",
        str(cli.config_file),
    ]
    return json.loads(run([*argv, "--json"], env=cli.env, check=False).stdout)


def changes(preview: str) -> dict[str, int]:
    """Pulumi's summary counts (`+ 3 to create`, `+-2 to replace`, `29 unchanged`)."""
    return {what: int(n) for n, what in re.findall(r"(\d+) (to create|to replace|to update|unchanged)", preview)}


def test_a_state_sees_the_engines_another_state_started_and_a_full_start_after_that_state_destroyed_them(
    two_states: tuple[Pulumi, Pulumi], sim_cluster: SimCluster
):
    b, a = two_states
    # Each with the stack's supervisor (the default): B's holds the container's name when A deploys.
    for state in (b, a):
        state.set("supervisor.enabled", "true")
    b.up()
    assert_group_serves(b, sim_cluster)
    theirs = engine_ids(sim_cluster)

    # A never deployed: its preview names every engine B started, before its `up` stops them.
    preview = a("preview").stdout
    for node, container in theirs.items():
        assert f"{node} runs a spark-llm engine that this state did not start (container {container[:12]}" in preview
    assert "`pulumi up` stops it and starts this state's group in its place" in preview
    took = a.up()
    assert_group_serves(a, sim_cluster)
    assert not set(engine_ids(sim_cluster).values()) & set(theirs.values())
    # B's supervisor, which held the name and watched the engines A replaced, is gone, said so (issue 41, 7: `up`
    # failed on the name while status said `up` starts the supervisor); A's runs in its place.
    said = took.stdout + took.stderr
    assert re.search(r"removed supervisor [0-9a-f]{12}: made by another state \(owner [0-9a-f]+\)", said), said[-3000:]
    running = sim_cluster.node_exec("head", "docker", "ps", "--format", "{{.Names}}").stdout.split()
    assert running.count("spark-llm-supervisor") == 1

    # B's state still holds its own containers, now gone: B's preview names A's engines and restarts the group.
    preview = b("preview").stdout
    assert "runs a spark-llm engine that this state did not start" in preview, preview
    assert changes(preview).get("to replace", 0) > 0, preview
    # And `spark-llm status` agrees with that preview.
    status = spark_llm_status(b)
    assert status["state"] == "drift" and "started by another state of this stack" in status["summary"], status

    # A destroys everything on the nodes, the files and the records B's drift checks were judged from included.
    a("destroy", "--yes", "--skip-preview")
    preview = b("preview").stdout
    assert "engine group: no engine container on any node; `pulumi up` starts the group" in preview, preview
    counts = changes(preview)
    assert counts.get("to replace", 0) + counts.get("to create", 0) > 0, preview

    # As docker leaves them when a container starts before its bind-mounted files exist.
    for path in LAUNCH_FILES:
        sim_cluster.node_exec("worker-1", "mkdir", "-p", path)
    preview = b("preview").stdout
    for path in LAUNCH_FILES:
        assert f"{path} on worker-1 is an empty directory, where spark-llm writes a file" in preview, preview
    b.up()
    assert_group_serves(b, sim_cluster)
    assert sim_cluster.node_exec("worker-1", "test", "-f", LAUNCH_FILES[0], check=False).returncode == 0


def test_destroy_finishes_when_launch_files_were_turned_into_directories(
    two_states: tuple[Pulumi, Pulumi], sim_cluster: SimCluster
):
    b, _ = two_states
    b.up()
    sim_cluster.node_exec("worker-1", "docker", "rm", "-f", "spark-llm-engine")
    for path in LAUNCH_FILES:
        sim_cluster.node_exec("worker-1", "rm", "-f", path)
        sim_cluster.node_exec("worker-1", "mkdir", "-p", path)
    kept = "/root/spark-llm/engine.env/notes.txt"  # a directory someone put something in: never deleted
    sim_cluster.node_exec("worker-1", "touch", kept)
    result = b("destroy", "--yes", "--skip-preview", check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert sim_cluster.node_exec("worker-1", "test", "-e", LAUNCH_FILES[0], check=False).returncode != 0
    assert sim_cluster.node_exec("worker-1", "test", "-f", kept, check=False).returncode == 0
    sim_cluster.node_exec("worker-1", "rm", "-rf", LAUNCH_FILES[1])
