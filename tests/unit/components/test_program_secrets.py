"""The API key and the Ray token under Pulumi mocks: secret 0600 files on the nodes that need them, never on a
command line or in plain state, their digests in the containers' labels."""

from __future__ import annotations

import base64
import json

from tests.conftest import dual_spark_raw
from tests.unit.components.program_requests import LOCAL_COMMAND, _is_secret
from tests.unit.graph_mocks import RAY_TOKEN, SECRET_SIG, label
from tests.unit.graph_mocks import inputs as _inputs
from tests.unit.graph_mocks import register as _register
from tests.unit.graph_mocks import without_secrets as _without_secrets


def test_api_key_reaches_only_the_head_as_a_secret_0600_file_and_never_a_command_line(monkeypatch):
    raw = dual_spark_raw()
    raw["apiKey"] = "sk-spark-0123456789abcdef"
    registered = _register(monkeypatch, raw, secrets=("apiKey",))
    key_file = _inputs(registered["spark-scripts-spark-1-api-key"])
    assert "else rm -f /home/aurora/spark-llm/api-key.yaml; fi; rm -f " in key_file["delete"]  # and its drift token
    assert _is_secret(key_file["stdin"]) and _is_secret(key_file["triggers"][0])
    assert "spark-scripts-spark-2-api-key" not in registered  # the worker serves no API
    # The head's command line carries the file's path, never the key.
    command = _inputs(registered["spark-engine-spark-1"])["command"]
    assert command[command.index("--config") + 1] == "/home/aurora/spark-llm/api-key.yaml"
    assert "--config" not in _inputs(registered["spark-engine-spark-2"])["command"]
    for name, request in registered.items():
        # Only inside Pulumi secrets (encrypted in state), nowhere in plain inputs.
        assert "sk-spark-0123456789abcdef" not in json.dumps(_without_secrets(_inputs(request))), name
    # The readiness gate reads the key on its stdin, a secret.
    assert _inputs(registered["spark-engine-ready"])["stdin"].get(SECRET_SIG)
    # A new key restarts the group: every container's labels carry the file's (secret) digest.
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        assert "labels" in registered[name].additionalSecretOutputs
        assert label(registered[name], "spark-llm.api-key").get(SECRET_SIG)


def test_ray_token_is_made_once_in_state_and_reaches_every_node_as_a_secret_0600_file(registered):
    made = registered["spark-scripts-ray-token"]
    assert made.type == LOCAL_COMMAND and made.parent.endswith("::spark-scripts")
    assert "stdout" in made.additionalSecretOutputs and _inputs(made)["logging"] == "none"
    # No triggers: nothing replaces it, so every later `up` keeps the token the first one made.
    assert not _inputs(made).get("triggers")
    for node in ("spark-1", "spark-2"):
        token_file = _inputs(registered[f"spark-scripts-{node}-ray-token"])
        assert _is_secret(token_file["stdin"]) and _is_secret(token_file["triggers"][0])
        assert "else rm -f /home/aurora/spark-llm/ray-token; fi; rm -f " in token_file["delete"]  # and its drift token
        script = base64.b64decode(token_file["stdin"]["value"].split("<<'SPARK_LLM_EOF'\n")[1].split("\n")[0])
        assert script.decode() == RAY_TOKEN
        container = _inputs(registered[f"spark-engine-{node}"])
        mount = next(v for v in container["volumes"] if v["containerPath"] == "/spark-llm/ray-token")
        assert mount == {
            "hostPath": "/home/aurora/spark-llm/ray-token",
            "containerPath": "/spark-llm/ray-token",
            "readOnly": True,
        }
        assert "RAY_AUTH_MODE=token" in container["envs"]
        assert "RAY_AUTH_TOKEN_PATH=/spark-llm/ray-token" in container["envs"]
        # A new token restarts the group: the containers' labels carry its (secret) digest.
        assert label(registered[f"spark-engine-{node}"], "spark-llm.ray-token").get(SECRET_SIG)
    for name, request in registered.items():
        # Only inside Pulumi secrets (encrypted in state): on no command line, in no env, no label, no script.
        assert RAY_TOKEN not in json.dumps(_without_secrets(_inputs(request))), name


def test_without_ray_no_token_and_no_token_file(monkeypatch):
    raw = dual_spark_raw()
    raw["engine"] = {**raw.get("engine", {}), "kind": "vllm", "executor": "native"}
    registered = _register(monkeypatch, raw)
    assert not any(name.endswith("ray-token") for name in registered)
    assert not any(e.startswith("RAY_AUTH") for e in _inputs(registered["spark-engine-spark-1"])["envs"])


def test_without_an_api_key_no_key_file_and_no_config_flag(registered):
    assert not any(name.endswith("-api-key") for name in registered)
    assert "--config" not in _inputs(registered["spark-engine-spark-1"])["command"]
