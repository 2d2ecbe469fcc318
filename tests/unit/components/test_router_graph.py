"""The router under Pulumi mocks (Pulumi.dual-spark.yaml with spark-llm:router): a container on the head's own docker
provider, made after the engine group, its files written by steps (the key's a secret), its labels what replaces it;
the stack's endpoint is the router's. Without the key: none of it, and the endpoint is the engine's."""

from __future__ import annotations

import base64
import json
import re

import pytest

from tests.unit.components.test_program_models import with_embed
from tests.unit.graph_mocks import (
    RecordingMonitor,
    dual_spark_stack_file,
    inputs,
    label,
    pinned,
    register,
    without_secrets,
)

DIGEST = "sha256:" + "ab" * 32
KEY = "sk-graph-test-key"


@pytest.fixture
def every_request(monkeypatch) -> list:
    """Every RegisterResource request, the component's too (the container has its name: `register` keeps one)."""
    seen: list = []
    recorded = RecordingMonitor.RegisterResource

    def record(self, request):
        seen.append(request)
        return recorded(self, request)

    monkeypatch.setattr(RecordingMonitor, "RegisterResource", record)
    return seen


@pytest.fixture
def routed(monkeypatch, every_request):
    raw = pinned(dual_spark_stack_file())
    raw["apiKey"] = KEY
    raw["router"] = {"image": f"ghcr.io/you/spark-llm-router@{DIGEST}"}
    return register(monkeypatch, raw, secrets=("apiKey",))


def test_the_router_is_a_container_on_the_head_made_after_the_engine_group(routed, every_request):
    container = routed["router"]
    assert container.type == "docker:index/container:Container"
    assert "::spark-docker-spark-1::" in container.provider  # the stack's provider of the head (components.stack)
    got = inputs(container)
    assert got["name"] == "spark-llm-router" and got["networkMode"] == "host" and got["restart"] == "unless-stopped"
    # Its log bounded (issue 41, 7: a line a health check a second, without end): the newest 60 MB at most.
    assert (got["logDriver"], got["logOpts"]) == ("json-file", {"max-size": "20m", "max-file": "3"})
    assert all(v["readOnly"] is True for v in got["volumes"])
    # The workers file's directory (a rewritten file shows in the running router), the key file.
    assert {v["hostPath"] for v in got["volumes"]} == {
        "/home/aurora/spark-llm/router-workers",
        "/home/aurora/spark-llm/router-api-key",
    }
    assert container.deleteBeforeReplace
    assert label(container, "spark-llm.router.revision")
    # The component waits for the whole engine group (its gate included).
    assert container.parent.endswith("spark-llm:components:Router::router")
    component = next(r for r in every_request if r.type == "spark-llm:components:Router")
    # (Pulumi expands a component in depends_on to the resources under it.)
    assert any(dep.endswith("::spark-engine-ready") for dep in component.dependencies), component.dependencies


def test_the_key_reaches_the_head_in_a_secret_step_only(routed):
    key = routed["router-key"]
    assert KEY not in json.dumps(without_secrets(inputs(key)))
    assert KEY in json.dumps(inputs(key))  # (encrypted in state: the secret's value, under its signature)
    for name, request in routed.items():
        if name != "router-key":
            assert KEY not in json.dumps(without_secrets(inputs(request))), name
    assert KEY not in json.dumps(inputs(routed["router"]).get("command", []))


def test_the_image_pinned_by_digest_is_pulled_on_the_head(routed):
    image = routed["router-image"]
    assert image.type == "docker:index/remoteImage:RemoteImage"
    assert inputs(image)["name"] == f"ghcr.io/you/spark-llm-router@{DIGEST}"
    assert "::spark-docker-spark-1::" in image.provider


def test_without_a_router_nothing_of_it_is_made(registered):
    assert not any(name.startswith("router") for name in registered)


def test_with_several_models_one_router_lists_each_at_its_engine_and_one_supervisor_keeps_it(
    monkeypatch, every_request
):
    raw = with_embed("0.2")
    raw["apiKey"] = KEY
    raw["router"] = {"image": DIGEST}
    registered = register(monkeypatch, raw, secrets=("apiKey",))
    workers = inputs(registered["router-workers"])["stdin"]
    # Each model's engine on the head's fabric address, at its own port (the router on the head reaches both).
    assert '{"model": "Qwen/Qwen3.5-122B-A10B-FP8", "url": "http://192.168.200.12:30000"}' in workers
    assert '{"model": "embed", "url": "http://192.168.200.12:30001"}' in workers
    # The router's spec is in the first model's supervisor only: two would race to make it again.
    specs = {name: json.dumps(inputs(r)) for name, r in registered.items() if name.endswith("supervisor-files")}
    assert set(specs) == {"spark-supervisor-files", "spark-embed-supervisor-files"}
    assert "spark-llm-router" in specs["spark-supervisor-files"]
    assert "spark-llm-router" not in specs["spark-embed-supervisor-files"]
    # It waits for both groups' gates.
    component = next(r for r in every_request if r.type == "spark-llm:components:Router")
    assert {"spark-engine-ready", "spark-embed-engine-ready"} <= {d.rsplit("::", 1)[-1] for d in component.dependencies}


def written(script: str, name: str) -> str:
    """What a file step's script (spark_llm.plan.node_files.file_script) writes to the file whose path ends in
    `name`: its heredoc, as text or base64."""
    after = script[script.index(f"/{name}") :]
    found = re.search(r"(cat|base64 -d) > \"\$tmp\" <<'([^']+)'\n(.*?)\n?\2\n", after, re.S)
    assert found is not None, after[:500]
    body = found.group(3)
    return base64.b64decode(body).decode() if found.group(1) == "base64 -d" else body + "\n"


def only_first_model(raw: dict) -> dict:
    return {**raw, "models": raw["models"][:1]}


def test_adding_a_model_rewrites_the_workers_file_and_waits_for_it_and_keeps_the_routers_container(
    monkeypatch,
):
    """Issue 40: the workers list was in the container's revision label, so adding a model replaced the router and
    its other models lost ~4 s of requests. Now the container's inputs (what replaces it) and the step that clears
    the name stay as they were; the workers step writes a new file and the ready step waits for the new model."""
    raw = with_embed("0.2")
    raw["apiKey"] = KEY
    raw["router"] = {"image": DIGEST}
    one = register(monkeypatch, only_first_model(raw), secrets=("apiKey",))
    two = register(monkeypatch, raw, secrets=("apiKey",))
    assert json.dumps(inputs(two["router"]), sort_keys=True) == json.dumps(inputs(one["router"]), sort_keys=True)
    assert inputs(two["router-clear"])["triggers"] == inputs(one["router-clear"])["triggers"]
    assert '"model": "embed"' in written(inputs(two["router-workers"])["stdin"], "workers.json")
    assert '"model": "embed"' not in written(inputs(one["router-workers"])["stdin"], "workers.json")
    assert inputs(two["router-ready"])["triggers"] != inputs(one["router-ready"])["triggers"]
    # The ready step runs after the new file is written.
    assert any(dep.endswith("::router-workers") for dep in two["router-ready"].dependencies)


def test_the_supervisors_copy_of_the_router_makes_the_container_pulumi_up_makes(routed):
    """The supervisor makes the router again from its spec when it was removed: the same image, command, environment,
    mounts (the workers file's directory, so it serves the models of the latest `up`) and revision."""
    container = inputs(routed["router"])
    spec = json.loads(written(inputs(routed["spark-supervisor-files"])["stdin"], "spec.json"))["router"]
    create = spec["create"]
    assert spec["container"] == container["name"]
    assert create["Cmd"] == container["command"] and create["Env"] == container["envs"]
    assert create["HostConfig"]["Binds"] == [f"{v['hostPath']}:{v['containerPath']}:ro" for v in container["volumes"]]
    assert create["HostConfig"]["NetworkMode"] == container["networkMode"]
    assert create["Labels"]["spark-llm.router.revision"] == label(routed["router"], "spark-llm.router.revision")
    assert "/home/aurora/spark-llm/router-workers:/run/spark-llm/router-workers:ro" in create["HostConfig"]["Binds"]
