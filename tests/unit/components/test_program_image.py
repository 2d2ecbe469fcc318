"""The program's EngineImage under Pulumi mocks: one image per node from its own docker provider, the head's
image id to the workers over the fabric, the containers waiting for it; the modes present and pull, the
operator as source, the exported image id."""

from __future__ import annotations

import json

import pulumi

from components.commands import run_stdin_script
from tests.unit.components.program_requests import LOCAL_COMMAND, _connection
from tests.unit.graph_mocks import IMAGE_ID, dual_spark_stack_file, pinned
from tests.unit.graph_mocks import inputs as _inputs
from tests.unit.graph_mocks import register as _register


def test_containers_wait_for_the_image_on_every_node(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        for step in ("spark-image-spark-1-verify", "spark-image-spark-2-verify", "spark-image-spark-2-image"):
            assert any(d.endswith(f"::{step}") for d in deps), (name, step)


def test_a_new_image_id_restarts_the_group(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        assert _inputs(registered[name])["image"] == IMAGE_ID, name


def test_each_node_image_comes_from_its_own_docker_provider_and_is_never_removed(registered):
    for node in ("spark-1", "spark-2"):
        request = registered[f"spark-image-{node}-image"]
        inputs = _inputs(request)
        assert inputs["name"] == dual_spark_stack_file()["image"]["ref"] and inputs["keepLocally"] is True
        assert "platform" not in inputs  # mode transfer pulls nothing
        assert f"::spark-docker-{node}::" in request.provider
        assert any(d.endswith(f"::spark-image-{node}") for d in request.dependencies)  # after its step
        verify = registered[f"spark-image-{node}-verify"]
        assert any(d.endswith(f"::spark-image-{node}-image") for d in verify.dependencies)


def test_workers_get_the_head_image_id_and_wait_for_the_head(registered):
    worker = registered["spark-image-spark-2"]
    assert any(d.endswith("::spark-image-spark-1-verify") for d in worker.dependencies)
    inputs = _inputs(worker)
    assert IMAGE_ID in inputs["triggers"] and f"HEAD_IMAGE_ID='{IMAGE_ID}'" in inputs["stdin"]
    verify = _inputs(registered["spark-image-spark-2-verify"])
    assert f"EXPECTED='{IMAGE_ID}'" in verify["stdin"]
    assert "but the head has" in verify["stdin"] and "spark-llm:image.platform" in verify["stdin"]


def test_transfer_to_a_worker_runs_on_the_head_over_the_fabric(registered):
    step = _inputs(registered["spark-image-spark-2"])
    connection = _connection(registered["spark-image-spark-2"])
    assert connection["host"] == "10.1.230.180" and "proxy" not in connection
    assert "FABRIC_SSH" in step["stdin"] and "docker load" in step["stdin"]
    assert step["create"] == run_stdin_script()


def test_image_id_is_exported(monkeypatch):
    outputs = {}

    def capture(name, value):
        outputs[name] = value

    monkeypatch.setattr(pulumi, "export", capture)
    _register(monkeypatch, pinned(dual_spark_stack_file()))
    assert "image_id" in outputs


def test_present_image_is_only_checked_on_every_node(registered_present):
    for node in ("spark-1", "spark-2"):
        step = _inputs(registered_present[f"spark-image-{node}"])
        assert "FABRIC_SSH" not in step["stdin"] and "load_on_node" not in step["stdin"], node
        host = _connection(registered_present[f"spark-image-{node}"])["host"]
        assert host == ("10.1.230.180" if node == "spark-1" else "192.168.200.13")


def test_pull_gives_the_platform_to_the_docker_provider(monkeypatch):
    raw = pinned(dual_spark_stack_file())
    raw["image"] = dict(raw["image"], mode="pull")
    registered = _register(monkeypatch, raw)
    for node in ("spark-1", "spark-2"):
        assert _inputs(registered[f"spark-image-{node}-image"])["platform"] == "linux/arm64"
        assert "on_node docker pull" not in _inputs(registered[f"spark-image-{node}"])["stdin"]  # the provider pulls


def test_operator_source_sends_from_this_machine_with_pinned_openssh(monkeypatch):
    raw = pinned(dual_spark_stack_file())
    raw["image"] = dict(raw["image"], source="operator")
    registered = _register(monkeypatch, raw)
    step = registered["spark-image-spark-1"]
    assert step.type == LOCAL_COMMAND
    inputs = _inputs(step)
    assert inputs["create"] == run_stdin_script() and "docker save" in inputs["stdin"]
    ssh = inputs["environment"]["SPARK_LLM_SSH"].split("\n")  # one argument a line
    assert ssh[0] == "ssh" and ssh[ssh.index("-i") + 1].endswith("/.ssh/id_ed25519")
    assert any(a.startswith("KnownHostsCommand=/bin/echo spark-1 ssh-ed25519") for a in ssh)
    assert "PRIVATE KEY" not in json.dumps(inputs)
    assert inputs["environment"]["SPARK_LLM_SSH_TARGET"] == "aurora@10.1.230.180"
    assert any(d.endswith("::spark-image-spark-1") for d in registered["spark-image-spark-1-image"].dependencies)
