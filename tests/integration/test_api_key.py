"""spark-llm:apiKey on the sim: the endpoint wants the key, and the key is nowhere in plaintext.

User story: an operator sets `pulumi config set --secret apiKey ...`; after `pulumi up` clients without the key get
401, clients with it get completions; the key is not on any process's command line on the nodes, not in the
launch script, not in Pulumi's state in plaintext; a new key restarts the group with it; removing it opens the
endpoint again and removes the key file from the head.
"""

from __future__ import annotations

import json
import secrets
import sys
import urllib.error

import pytest

from tests.integration.conftest import REPO, complete, run

pytestmark = pytest.mark.integration

KEY_FILE = "/root/spark-llm/api-key.yaml"


def status_without_key(outputs: dict) -> int:
    try:
        complete(outputs)
    except urllib.error.HTTPError as error:
        return error.code
    return 200


def command_lines(sim_cluster, node: str) -> str:
    """Every process's argv on the node (its engine container's processes included: they share the kernel)."""
    return sim_cluster.node_exec(node, "sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '").stdout


def test_api_key_guards_the_endpoint_and_never_shows_in_plaintext(pulumi, sim_cluster):
    key = f"sk-sim-{secrets.token_hex(12)}"
    pulumi("config", "set", "--secret", "apiKey", key)
    try:
        out = pulumi.up()
        outputs = pulumi.outputs()
        assert status_without_key(outputs) == 401
        assert complete(outputs, api_key=key)["usage"]["completion_tokens"] == 4

        assert key not in out.stdout + out.stderr
        for node in ("head", "worker-1"):
            assert key not in command_lines(sim_cluster, node), node
            assert key not in sim_cluster.node_exec(node, "cat", "/root/spark-llm/launch.sh").stdout
        assert sim_cluster.node_exec("head", "stat", "-c", "%a %U", KEY_FILE).stdout.strip() == "600 root"
        assert sim_cluster.node_exec("worker-1", "test", "-e", KEY_FILE, check=False).returncode != 0
        state = pulumi("stack", "export").stdout
        assert key not in state
        # The readiness gate reads the key on its stdin: there, and in the containers' labels, only encrypted.
        resources = {r["urn"].rsplit("::", 1)[-1]: r for r in json.loads(state)["deployment"]["resources"]}
        assert "ciphertext" in resources["spark-engine-ready"]["inputs"]["stdin"]
        assert "ciphertext" in json.dumps(resources["spark-engine-head"]["outputs"]["labels"])
        # The operator tools authenticate with the stack's key too.
        smoke = run(
            [
                sys.executable,
                "-m",
                "spark_llm.ops.cli",
                "smoke",
                "--stack",
                "sim",
                "--config-file",
                str(pulumi.config_file),
                "--requests",
                "1",
                "--concurrency",
                "1",
            ],
            env=pulumi.env,
            cwd=REPO,
        )
        assert key not in smoke.stdout + smoke.stderr

        # A new key: preview announces the group restart, up applies it; the old key stops working.
        new_key = f"sk-sim-{secrets.token_hex(12)}"
        pulumi("config", "set", "--secret", "apiKey", new_key)
        preview = pulumi("preview").stdout
        assert "spark-scripts-head-api-key replace" in preview and "spark-engine-head replace" in preview
        assert new_key not in preview and key not in preview
        pulumi.up()
        assert complete(outputs, api_key=new_key)["usage"]["completion_tokens"] == 4
        with pytest.raises(urllib.error.HTTPError) as refused:
            complete(outputs, api_key=key)
        assert refused.value.code == 401
    finally:
        pulumi("config", "rm", "apiKey")
    # No key: the endpoint is open again and the key file is gone from the head.
    pulumi.up()
    assert status_without_key(pulumi.outputs()) == 200
    assert sim_cluster.node_exec("head", "test", "-e", KEY_FILE, check=False).returncode != 0
