"""`sim up` writes Pulumi.sim.yaml: the cluster's nodes and key path, and nothing of the user's lost (issue 31, 12:
`WORKERS=3 make demo` used to rewrite the file whole, and the next `up` deleted the supervisor a user enabled)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

SIM = Path(__file__).resolve().parents[3] / "sim"


@pytest.fixture
def sim_modules(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(SIM))
    import paths  # sim/'s flat modules, as sim/sim imports them
    import stack_file
    import state

    return paths, stack_file, state


def node(state, name: str, address: str):
    role = "head" if name == "head" else "worker"
    return state.Node(
        name, role, f"c-{name}", address, "ssh-ed25519 AAAAkey", "172.28.0.10" if role == "head" else None
    )


def test_sim_up_rewrites_the_nodes_and_keeps_the_users_keys_and_pulumis(sim_modules, tmp_path: Path):
    paths, stack_file, state = sim_modules
    where = paths.SimPaths(home=tmp_path, repo=SIM.parent)
    where.stack_file.write_text(
        yaml.safe_dump(
            {
                "encryptionsalt": "v1:salt",
                "config": {
                    "spark-llm:nodes": [{"name": "head", "host": "172.28.0.2"}],
                    "spark-llm:sshKeyPath": "/old/key",
                    "spark-llm:supervisor": {"enabled": True},
                    "spark-llm:apiKey": {"secure": "v1:cipher"},
                    "spark-llm:engine": "vllm",
                },
            }
        )
    )
    three = [node(state, "head", "172.29.0.10")] + [node(state, f"worker-{i}", f"172.29.0.1{i}") for i in (1, 2, 3)]
    stack_file.write_stack_file(where, three)
    written = yaml.safe_load(where.stack_file.read_text())
    config = written["config"]
    assert written["encryptionsalt"] == "v1:salt"
    assert [n["name"] for n in config["spark-llm:nodes"]] == ["head", "worker-1", "worker-2", "worker-3"]
    assert config["spark-llm:sshKeyPath"] == str(where.operator_key)
    assert config["spark-llm:supervisor"] == {"enabled": True}
    assert config["spark-llm:apiKey"] == {"secure": "v1:cipher"}
    assert config["spark-llm:engine"] == "vllm"  # the user's value, over sim/stack-defaults.yaml's
    defaults = stack_file.load_stack_defaults(where.stack_defaults)
    assert all(key in config for key in defaults)
