"""Connections that cannot strand the stack, and first contact with a deployment made by hand (sim, real CLI).

User stories from the new-user replay: a mistyped `sshKeyPath` fails `pulumi preview` naming the key before
anything runs; rotating to a second authorized key restarts nothing; a stack whose last `up` used a key file that
is gone recovers with one `pulumi up` once the config names a working key; a node that already runs a container
under the engine's name (started by hand, as in the seeds) stops `pulumi up` before anything is touched.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import WORKER_KEY
from tests.integration.conftest import STACK_FILE, as_the_project_stack_file, complete, run

pytestmark = pytest.mark.integration

NODES = ("head", "worker-1")
AUTHORIZED = "/root/.ssh/authorized_keys"


def next_second() -> int:
    """A whole second from which on a node's log is fresh (`docker logs --since` counts whole seconds)."""
    since = int(time.time()) + 1
    time.sleep(since - time.time())
    return since


def accepted_since(sim_cluster, node: str, since: int) -> int:
    """ssh logins the node's sshd (PID 1 of the sim node, logging to stderr) accepted since `since`."""
    log = run(["docker", "logs", "--since", str(since), sim_cluster.container(node)]).stderr
    return log.count("Accepted publickey")


def engine_ids(sim_cluster) -> dict[str, str]:
    return {
        n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", "spark-llm-engine").stdout.strip()
        for n in NODES
    }


def new_key(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


@pytest.fixture(scope="module")
def deployed(pulumi) -> Iterator:
    pulumi.up()
    yield pulumi


def test_a_missing_key_file_fails_preview_naming_the_key_and_runs_nothing(deployed, sim_cluster):
    deployed.set("sshKeyPath", "/nonexistent/id_ed25519")
    try:
        since = next_second()
        failed = deployed("preview", check=False)
        text = failed.stdout + failed.stderr
        assert failed.returncode != 0
        assert "spark-llm:sshKeyPath: cannot read the ssh private key /nonexistent/id_ed25519" in text, text
        assert "Traceback" not in text
        assert all(accepted_since(sim_cluster, n, since) == 0 for n in NODES)
    finally:
        deployed.reset_config()


def test_rotating_to_a_second_authorized_key_restarts_no_container(deployed, sim_cluster, tmp_path):
    public = new_key(tmp_path / "id_rotated")
    old = {n: sim_cluster.node_exec(n, "cat", AUTHORIZED).stdout for n in NODES}
    before = engine_ids(sim_cluster)
    try:
        for n in NODES:  # the operator authorizes the new key, then drops the old one
            sim_cluster.node_exec(n, "sh", "-c", f"echo '{public}' > {AUTHORIZED}")
        deployed.set("sshKeyPath", str(tmp_path / "id_rotated"))
        out = deployed.up().stdout
        assert not re.search(r"\S+ (replaced|deleted|created)", out), out
        assert engine_ids(sim_cluster) == before
        # Every provider now works with the new key alone: the docker provider's reads too.
        deployed("preview", "--refresh", "--expect-no-changes")
        assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
    finally:
        for n in NODES:
            sim_cluster.node_exec(n, "sh", "-c", f"cat > {AUTHORIZED} <<'EOF'\n{old[n]}EOF\n")
        deployed.reset_config()
    # No `up` back to the first key: the next test's first `up` moves the stack to another key file again.


def test_a_stack_whose_key_file_is_gone_recovers_with_one_up(deployed, sim_cluster, tmp_path):
    sim_key = Path(STACK_FILE.read_text().split("spark-llm:sshKeyPath:", 1)[1].split()[0].strip("'\""))
    temporary = tmp_path / "id_temporary"
    temporary.write_text(sim_key.read_text())
    temporary.chmod(0o600)
    deployed.set("sshKeyPath", str(temporary))
    deployed.up()  # state now records the temporary key (its path in the docker providers)
    temporary.unlink()
    deployed.reset_config()
    # The fixed config and a change that replaces every container, in the same `up`.
    deployed.set("engine.env.SPARK_LLM_TEST_RECOVERY", "1")
    try:
        out = deployed.up().stdout
        assert "spark-engine-worker-1 created replacement" in out
        assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
    finally:
        deployed.reset_config()  # no `up` back: the next test starts with a destroy


def test_a_container_started_by_hand_stops_up_before_anything_is_touched(deployed, sim_cluster):
    deployed("destroy", "--yes", "--skip-preview")
    image = "spark-llm/standin-engine:sim"
    sim_cluster.node_exec("worker-1", "docker", "run", "-d", "--name", "spark-llm-engine", image, "sleep", "600")
    try:
        since = next_second()
        failed = deployed.up(check=False)
        text = failed.stdout + failed.stderr
        assert failed.returncode != 0
        assert "worker-1 already runs a container named spark-llm-engine that this stack's `pulumi up` did not" in text
        assert "Nothing was run on any node" in text
        assert not re.search(r"(Command|Container|RemoteImage) \S+ created", failed.stdout), failed.stdout
        head = sim_cluster.node_exec("head", "docker", "ps", "-aq", "--filter", "name=spark-llm-engine").stdout
        assert head.strip() == ""  # nothing started on the head either
        assert accepted_since(sim_cluster, "worker-1", since) <= 1  # the read-only probe, nothing else
        # The printed fix, run as printed by a shell: it reaches the worker through the head with the pinned keys.
        fix = re.search(r"^\s*(spark-llm exec .*docker rm -f spark-llm-engine)\s*$", text, re.M)
        assert fix, text
        with as_the_project_stack_file(deployed):
            removed = run(["bash", "-c", fix.group(1)], env=deployed.env, check=False)
        assert removed.returncode == 0, (fix.group(1), removed.stdout, removed.stderr)
        gone = sim_cluster.node_exec("worker-1", "docker", "ps", "-aq", "--filter", "name=spark-llm-engine").stdout
        assert gone.strip() == ""
    finally:
        sim_cluster.node_exec("worker-1", "docker", "rm", "-f", "spark-llm-engine", check=False)
        up = deployed.up(check=False)  # the module's deployment back, for the tests after this one
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4


def provider_pins(pulumi) -> dict[str, str]:
    """Each docker provider's pinned keys in the state, as its saved `sshOpts` carry them (KnownHostsCommand)."""
    state = json.loads(pulumi("stack", "export").stdout)["deployment"]["resources"]
    providers = [r for r in state if r["type"] == "pulumi:providers:docker"]
    assert providers, "no docker provider in the state"
    # sshOpts is saved as a list or as its JSON text: read it from the JSON of the inputs either way.
    found = {
        r["urn"]: re.findall(r"KnownHostsCommand=/bin/echo ([\w@.:+/= -]+)", json.dumps(r["inputs"])) for r in providers
    }
    return {urn: " | ".join(pins) for urn, pins in found.items()}


@pytest.mark.parametrize("index,node", [(0, "head"), (1, "worker-1")])
def test_a_wrong_host_key_set_right_after_a_run_fails_preview_naming_the_key_and_saves_no_provider(
    deployed, sim_cluster, index, node
):
    """Regression (issue 14, item 5): a master connection from the last run stood in for the new pin's check."""
    deployed("preview", "--expect-no-changes")  # a run that connects to every node with the right pins
    pins = provider_pins(deployed)
    assert all(sim_cluster.nodes()[0]["hostKey"].split()[1] in pin for pin in pins.values()), pins
    deployed.set(f"nodes[{index}].hostKey", WORKER_KEY)  # well-formed, not the node's key; within ControlPersist
    try:
        for command in (("preview",), ("up", "--yes", "--skip-preview")):
            failed = deployed(*command, check=False)
            text = failed.stdout + failed.stderr
            assert failed.returncode != 0, text
            assert f"spark-llm:nodes[{index}].hostKey is not the host key {node} presents" in text, text
            assert "ssh-keyscan -t ed25519" in text and "Nothing was run on any node." in text
            assert "Traceback" not in text
        assert provider_pins(deployed) == pins  # no provider saved with the wrong pin
        # The printed way to read the node's real key, run as printed (a worker's: on the head, pinned).
        scan = re.search(r"^\s*((?:spark-llm exec .* -- )?ssh-keyscan .*\S)\s*$", text, re.M)
        assert scan, text
        with as_the_project_stack_file(deployed):
            read = run(["bash", "-c", scan.group(1)], env=deployed.env, check=False)
        assert read.returncode == 0 and sim_cluster.nodes()[index]["hostKey"] in read.stdout, (scan.group(1), read)
    finally:
        deployed.reset_config()
