"""The dual-spark stack under Pulumi mocks: the resource graph the real program registers, no node touched.

A MockMonitor subclass records every RegisterResource request, so the tests assert what the engine would be
told: types, parents, depends_on edges, delete_before_replace, triggers and secrets.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pulumi
import pytest
import yaml
from google.protobuf import json_format
from pulumi.runtime.mocks import MockMonitor

from spark_llm.config import ConfigError, parse
from tests.conftest import HEAD_KEY, WORKER_KEY

ROOT = Path(__file__).resolve().parents[2]
SECRET_SIG = "4dabf18193072939515e22adb298388d"


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        outs = dict(args.inputs)
        if args.typ.endswith("EngineContainer"):
            outs["stdout"] = f"container-of-{args.name}\n"
        return [f"{args.name}-id", outs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks):
        super().__init__(mocks)
        self.requests = []

    def RegisterResource(self, request):  # noqa: N802 (gRPC name)
        self.requests.append(request)
        return super().RegisterResource(request)


def _inputs(request) -> dict:
    return json_format.MessageToDict(request.object)


def dual_spark_stack_file() -> dict:
    """Pulumi.dual-spark.yaml as committed, keys without the namespace."""
    raw = yaml.safe_load((ROOT / "Pulumi.dual-spark.yaml").read_text())["config"]
    return {k.split(":", 1)[1]: v for k, v in raw.items()}


def pinned(raw: dict) -> dict:
    """What an operator does before the first `up`: pin the nodes' real host keys (from ssh-keyscan)."""
    raw["nodes"][0]["hostKey"], raw["nodes"][1]["hostKey"] = HEAD_KEY, WORKER_KEY
    return raw


def test_committed_dual_spark_file_asks_for_real_host_keys():
    with pytest.raises(ConfigError, match=r"nodes\[0\]\.hostKey: is the placeholder.*ssh-keyscan"):
        parse(dual_spark_stack_file())


@pytest.fixture
def registered(monkeypatch):
    """Run __main__.py for the dual-spark stack under mocks; return {name: RegisterResource request}.

    Mocks answer every resource registration: nothing is sent to the stack's addresses (real machines elsewhere).
    """
    monitor = RecordingMonitor(Mocks())
    pulumi.runtime.set_mocks(Mocks(), project="spark-llm", stack="dual-spark", preview=False, monitor=monitor)
    raw = pinned(dual_spark_stack_file())
    pulumi.runtime.set_all_config({f"spark-llm:{k}": json.dumps(v) for k, v in raw.items()})
    monkeypatch.chdir(ROOT)

    @pulumi.runtime.test
    def run():
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    run()
    return {r.name: r for r in monitor.requests}


def test_components_and_their_children(registered):
    types = {name: r.type for name, r in registered.items()}
    assert types["spark"] == "spark-llm:components:SparkCluster"
    assert types["spark-scripts"] == "spark-llm:components:LaunchScripts"
    assert types["spark-engine"] == "spark-llm:components:EngineGroup"
    files = sorted(n for n, t in types.items() if t.endswith("RemoteFile"))
    assert files == [
        "spark-scripts-spark-1-env",
        "spark-scripts-spark-1-script",
        "spark-scripts-spark-2-env",
        "spark-scripts-spark-2-script",
    ]
    containers = sorted(n for n, t in types.items() if t.endswith("EngineContainer"))
    assert containers == ["spark-engine-spark-1", "spark-engine-spark-2"]
    assert types["spark-engine-ready"].endswith("GroupReady")


def test_head_container_waits_for_worker_and_is_replaced_with_it(registered):
    head, worker = registered["spark-engine-spark-1"], registered["spark-engine-spark-2"]
    assert any(dep.endswith("::spark-engine-spark-2") for dep in head.dependencies)
    assert head.deleteBeforeReplace and worker.deleteBeforeReplace
    head_triggers = _inputs(head)["triggers"]
    assert "spark-engine-spark-2-id" in head_triggers  # worker's ID: a new worker replaces the head
    assert _inputs(worker)["triggers"][0] == head_triggers[0]  # the group revision


def test_containers_wait_for_the_scripts(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        assert any(d.endswith("::spark-scripts-spark-2-script") for d in deps), name
        assert any(d.endswith("::spark-scripts-spark-1-env") for d in deps), name


def test_worker_is_reached_through_the_head_with_pinned_keys(registered):
    conn = _inputs(registered["spark-engine-spark-2"])["connection"]
    assert conn["host"] == "192.168.200.13" and conn["via"]["host"] == "10.1.230.180"
    assert conn["host_key"].startswith("ssh-ed25519 ") and conn["via"]["host_key"].startswith("ssh-ed25519 ")
    assert "BEGIN OPENSSH PRIVATE KEY" not in json.dumps(conn)  # a key path, never key material


def test_script_is_byte_identical_on_every_node_and_env_file_is_secret(registered):
    s1 = _inputs(registered["spark-scripts-spark-1-script"])
    s2 = _inputs(registered["spark-scripts-spark-2-script"])
    assert s1["content"] == s2["content"] and s1["mode"] == "0755"
    env = _inputs(registered["spark-scripts-spark-2-env"])
    assert env["mode"] == "0600"
    assert isinstance(env["content"], dict) and env["content"].get(SECRET_SIG), "env file content must be a secret"


def test_readiness_gate_follows_the_head_and_watches_every_member(registered):
    ready = registered["spark-engine-ready"]
    assert any(d.endswith("::spark-engine-spark-1") for d in ready.dependencies)
    assert "spark-engine-spark-1-id" in _inputs(ready)["triggers"]
    assert [m["name"] for m in _inputs(ready)["members"]] == ["spark-1", "spark-2"]


def test_every_container_judges_drift_over_the_whole_group(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        group = _inputs(registered[name])["group"]
        assert [(m["name"], m["role"]) for m in group] == [("spark-1", "head"), ("spark-2", "worker")]
        assert all(m["script_path"] == "/home/aurora/spark-llm/launch.sh" for m in group)


def test_start_commands_name_role_and_node(registered):
    assert _inputs(registered["spark-engine-spark-2"])["create"].strip() == (
        "/home/aurora/spark-llm/launch.sh start worker spark-2"
    )
    assert _inputs(registered["spark-engine-spark-1"])["create"].strip().endswith("start head spark-1")
