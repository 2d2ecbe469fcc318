"""Bad input stops `pulumi preview` with the key named, and nothing runs on any node.

Each broken config of the unit table (tests/unit/test_config_bad_input.py), plus a secret given in plain text, is
written into the stack's config file and previewed with the real CLI against the live sim stack.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.unit.test_config_bad_input import BROKEN, Mutation

pytestmark = pytest.mark.integration

NAMESPACE = "spark-llm:"


def _node_state(sim_cluster) -> dict[str, str]:
    """What a command on a node would change: engine containers and the files under the remote dir."""
    state = {}
    for node in ("head", "worker-1"):
        ps = sim_cluster.node_exec(node, "docker", "ps", "-a", "--format", "{{.ID}} {{.State}} {{.CreatedAt}}").stdout
        files = sim_cluster.node_exec(
            node, "sh", "-c", "ls -la --time-style=full-iso /root/spark-llm 2>&1", check=False
        ).stdout
        state[node] = ps + files
    return state


def _secret_in_plain_text(raw: dict) -> None:
    raw["hfToken"] = "hf_plaintexttoken"


CASES = [(case_id, mutate, key) for case_id, mutate, key, _ in BROKEN] + [
    ("secret-in-plain-text", _secret_in_plain_text, "spark-llm:hfToken"),
]


@pytest.fixture(scope="module")
def deployed_state(pulumi, sim_cluster):
    pulumi.up()
    return _node_state(sim_cluster)


@pytest.mark.parametrize(("mutate", "key"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_config_fails_preview_naming_the_key(pulumi, sim_cluster, deployed_state, mutate: Mutation, key):
    pulumi.reset_config()
    document = yaml.safe_load(pulumi.config_file.read_text())
    raw = {k.removeprefix(NAMESPACE): v for k, v in document["config"].items()}
    broken = copy.deepcopy(raw)
    mutate(broken)
    document["config"] = {NAMESPACE + k: v for k, v in broken.items()}
    pulumi.config_file.write_text(yaml.safe_dump(document, sort_keys=False))
    try:
        result = pulumi("preview", check=False)
    finally:
        pulumi.reset_config()
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    if "error: validating stack config:" in output:
        # Pulumi.yaml declares each top-level key's type: Pulumi itself refuses a wrong shape before the
        # program runs, naming that top-level key (`spark-llm:nodes must be of type 'array<object>'`).
        assert f"'{key.split('.')[0].split('[')[0]}'" in output, output
    else:
        assert key in output, output
    assert "[head]" not in output and "[worker-1]" not in output  # no script ran on a node
    assert _node_state(sim_cluster) == deployed_state
