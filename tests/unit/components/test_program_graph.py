"""The dual-spark stack under Pulumi mocks: the resource graph the real program registers, no node touched.

A MockMonitor subclass records every RegisterResource request, so the tests assert what the engine would be
told: types, parents, depends_on edges, delete_before_replace, triggers and secrets. Here: the committed stack file,
the components and their children, the providers and connections, the launch script and env file steps; the
image, weights, drift and secrets each in a test_program_*.py of their own.
"""

from __future__ import annotations

import json

import pytest
import yaml

from components.commands import run_stdin_script
from spark_llm.config import ConfigError, parse
from tests.conftest import HEAD_KEY, WORKER_KEY
from tests.unit.components.program_requests import COMMAND, LOCAL_COMMAND, REMOTE_IMAGE, _connection, _is_secret
from tests.unit.graph_mocks import FAKE_PRIVATE_KEY, ROOT, dual_spark_stack_file, pinned
from tests.unit.graph_mocks import inputs as _inputs
from tests.unit.graph_mocks import register as _register
from tests.unit.graph_mocks import without_secrets as _without_secrets


def test_committed_dual_spark_file_asks_for_real_host_keys_of_both_nodes_at_once():
    with pytest.raises(ConfigError) as raised:
        parse(dual_spark_stack_file())
    lines = str(raised.value).splitlines()
    assert [line.split(":")[1] for line in lines[1:]] == ["nodes[0].hostKey", "nodes[1].hostKey"], lines
    assert all("is the placeholder" in line and "ssh-keyscan" in line for line in lines[1:])


def test_components_and_their_children(registered):
    types = {name: r.type for name, r in registered.items()}
    assert types["spark"] == "spark-llm:components:SparkCluster"
    assert types["spark-scripts"] == "spark-llm:components:LaunchScripts"
    assert types["spark-engine"] == "spark-llm:components:EngineGroup"
    assert types["spark-image"] == "spark-llm:components:EngineImage"
    assert types["spark-weights"] == "spark-llm:components:ModelWeights"
    assert types["spark-engine-ready"] == LOCAL_COMMAND
    containers = sorted(n for n, t in types.items() if t == "docker:index/container:Container")
    # (Pulumi.dual-spark.yaml turns the supervisor on: tests/unit/components/test_supervisor_graph.py.)
    assert containers == ["spark-engine-spark-1", "spark-engine-spark-2", "spark-supervisor"]
    assert not any(t.startswith("pulumi-python:dynamic") for t in types.values())
    # The real providers only: no dynamic resource is left in these three components.
    commands = sorted(n for n, t in types.items() if t == COMMAND and not n.startswith("spark-engine-"))
    assert commands == [
        "spark-image-spark-1",
        "spark-image-spark-1-verify",
        "spark-image-spark-2",
        "spark-image-spark-2-verify",
        "spark-scripts-spark-1-env",
        "spark-scripts-spark-1-ray-token",
        "spark-scripts-spark-1-script",
        "spark-scripts-spark-2-env",
        "spark-scripts-spark-2-ray-token",
        "spark-scripts-spark-2-script",
        "spark-supervisor-authorize-spark-2",
        "spark-supervisor-clear",
        "spark-supervisor-files",
        "spark-supervisor-image-check",
        "spark-supervisor-key",
        "spark-supervisor-state",
        "spark-weights-spark-1",
        "spark-weights-spark-1-retention",
        "spark-weights-spark-2-retention",
        "spark-weights-workers",
    ]
    assert sorted(n for n, t in types.items() if t == REMOTE_IMAGE) == [
        "spark-image-spark-1-image",
        "spark-image-spark-2-image",
    ]
    assert sorted(n for n, t in types.items() if t == "pulumi:providers:docker") == [
        "spark-docker-spark-1",
        "spark-docker-spark-2",
    ]
    assert not any(
        "dynamic" in t for n, t in types.items() if n.startswith(("spark-image", "spark-weights", "spark-scripts"))
    )
    for name in [*commands, "spark-image-spark-1-image"]:
        component = name.split("-")[1]
        assert registered[name].parent.endswith(f"::spark-{component}"), name


def test_containers_wait_for_the_scripts(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        assert any(d.endswith("::spark-scripts-spark-2-script") for d in deps), name
        assert any(d.endswith("::spark-scripts-spark-1-env") for d in deps), name


def test_script_is_byte_identical_on_every_node_and_env_file_is_secret(registered):
    s1 = _inputs(registered["spark-scripts-spark-1-script"])
    s2 = _inputs(registered["spark-scripts-spark-2-script"])
    assert s1["stdin"] == s2["stdin"] and "chmod 0755" in s1["stdin"]
    assert s1["create"] == run_stdin_script() and s1["delete"].endswith(
        "else rm -f /home/aurora/spark-llm/launch.sh; fi;"
        " rm -f /home/aurora/spark-llm/state/file-home_aurora_spark-llm_launch.sh"
    )
    env = registered["spark-scripts-spark-2-env"]
    assert _is_secret(_inputs(env)["stdin"]), "env file content must be a secret"
    assert _is_secret(_inputs(env)["triggers"][0])  # its digest too
    assert "else rm -f /home/aurora/spark-llm/engine.env; fi; rm -f " in _inputs(env)["delete"]  # and its drift token
    # Same path: the old file is removed before the new one is written, never after.
    assert env.deleteBeforeReplace and registered["spark-scripts-spark-1-script"].deleteBeforeReplace


def test_file_steps_rerun_only_when_their_content_changes(monkeypatch):
    raw = pinned(dual_spark_stack_file())
    before = _register(monkeypatch, raw)
    raw["engine"] = dict(raw["engine"], port=30001)  # a new launch script, the same env file
    after = _register(monkeypatch, raw)
    digest = lambda r, n: _inputs(r[n])["triggers"][0]  # noqa: E731
    assert digest(before, "spark-scripts-spark-1-script") != digest(after, "spark-scripts-spark-1-script")
    assert _inputs(before["spark-scripts-spark-1-env"]) == _inputs(after["spark-scripts-spark-1-env"])


def test_commands_reach_nodes_with_pinned_keys_and_the_worker_through_the_head(registered):
    conn = _connection(registered["spark-image-spark-2-verify"])
    assert conn["host"] == "192.168.200.13" and conn["proxy"]["host"] == "10.1.230.180"
    assert conn["hostKey"] == WORKER_KEY and conn["proxy"]["hostKey"] == HEAD_KEY
    # The key's contents travel only inside the (secret) connection: nowhere in plaintext state.
    assert conn["privateKey"] == FAKE_PRIVATE_KEY and conn["proxy"]["privateKey"] == FAKE_PRIVATE_KEY
    for name, request in registered.items():
        assert "c3BhcmstbGxtIHRlc3Qga2V5" not in json.dumps(_without_secrets(_inputs(request))), name
    head = _connection(registered["spark-image-spark-1"])
    assert head["host"] == "10.1.230.180" and "proxy" not in head
    # A connection (key, user, port) is no trigger: its change is an update that only says so.
    assert "connection settings recorded" in _inputs(registered["spark-image-spark-1"])["update"]


def test_every_command_and_docker_resource_uses_a_provider_the_program_declared(registered):
    """Pulumi.yaml disables the default command and docker providers (a docker resource without its node's provider
    would talk to the operator's own engine; a command without one would fail `up` with "Default provider ...
    disabled"): every such resource names a provider the program declared."""
    settings = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    assert settings["pulumi:disable-default-providers"]["value"] == ["command", "docker"]
    declared = {r.type: r for r in registered.values() if r.type.startswith("pulumi:providers:")}
    assert "pulumi:providers:command" in declared
    users = [r for r in registered.values() if r.type.split(":")[0] in ("command", "docker")]
    assert len(users) > 20
    for request in users:
        package = request.type.split(":")[0]
        assert f"pulumi:providers:{package}::spark-" in request.provider, (request.name, request.provider)
