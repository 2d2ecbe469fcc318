"""The dual-spark stack under Pulumi mocks: scripts, image and weights as the real program registers them.

(The engine group's graph: tests/unit/test_engine_group_graph.py; the mocks: tests/unit/graph_mocks.py.)
"""

from __future__ import annotations

import json

import pulumi
import pytest

from spark_llm.config import ConfigError, parse
from tests.conftest import dual_spark_raw
from tests.unit.graph_mocks import (
    IMAGE_ID,
    SECRET_SIG,
    WEIGHTS_DIGEST,
    dual_spark_stack_file,
    label,
    pinned,
)
from tests.unit.graph_mocks import inputs as _inputs
from tests.unit.graph_mocks import register as _register
from tests.unit.graph_mocks import without_secrets as _without_secrets


def test_committed_dual_spark_file_asks_for_real_host_keys():
    with pytest.raises(ConfigError, match=r"nodes\[0\]\.hostKey: is the placeholder.*ssh-keyscan"):
        parse(dual_spark_stack_file())


@pytest.fixture
def registered(monkeypatch):
    """Pulumi.dual-spark.yaml as committed (image transferred from the head), host keys pinned."""
    return _register(monkeypatch, pinned(dual_spark_stack_file()))


@pytest.fixture
def registered_present(monkeypatch):
    """The dual-spark stack with the image already on every node."""
    raw = pinned(dual_spark_stack_file())
    raw["image"] = dict(raw["image"], mode="present")
    return _register(monkeypatch, raw)


def test_components_and_their_children(registered):
    types = {name: r.type for name, r in registered.items()}
    assert types["spark"] == "spark-llm:components:SparkCluster"
    assert types["spark-scripts"] == "spark-llm:components:LaunchScripts"
    assert types["spark-engine"] == "spark-llm:components:EngineGroup"
    assert types["spark-image"] == "spark-llm:components:EngineImage"
    files = sorted(n for n, t in types.items() if t.endswith("RemoteFile"))
    assert files == [
        "spark-scripts-spark-1-env",
        "spark-scripts-spark-1-script",
        "spark-scripts-spark-2-env",
        "spark-scripts-spark-2-script",
    ]
    commands = sorted(n for n, t in types.items() if t.endswith("RemoteCommand"))
    assert commands == [
        "spark-image-spark-1",
        "spark-image-spark-2",
        "spark-weights-spark-1",
        "spark-weights-spark-1-retention",
        "spark-weights-spark-2",
        "spark-weights-spark-2-retention",
    ]
    assert all(registered[n].parent.endswith("::spark-image") for n in commands if n.startswith("spark-image-"))
    assert types["spark-weights"] == "spark-llm:components:ModelWeights"


def test_containers_wait_for_the_scripts(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        assert any(d.endswith("::spark-scripts-spark-2-script") for d in deps), name
        assert any(d.endswith("::spark-scripts-spark-1-env") for d in deps), name


def test_script_is_byte_identical_on_every_node_and_env_file_is_secret(registered):
    s1 = _inputs(registered["spark-scripts-spark-1-script"])
    s2 = _inputs(registered["spark-scripts-spark-2-script"])
    assert s1["content"] == s2["content"] and s1["mode"] == "0755"
    env = _inputs(registered["spark-scripts-spark-2-env"])
    assert env["mode"] == "0600"
    assert isinstance(env["content"], dict) and env["content"].get(SECRET_SIG), "env file content must be a secret"


def test_containers_wait_for_the_image_on_every_node(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        assert any(d.endswith("::spark-image-spark-1") for d in deps), name
        assert any(d.endswith("::spark-image-spark-2") for d in deps), name


def test_a_new_image_id_restarts_the_group(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        assert _inputs(registered[name])["image"] == IMAGE_ID, name


def test_workers_get_the_head_image_id_and_wait_for_the_head_step(registered):
    worker = registered["spark-image-spark-2"]
    assert any(d.endswith("::spark-image-spark-1") for d in worker.dependencies)
    assert _inputs(worker)["environment"] == {"SPARK_LLM_HEAD_IMAGE_ID": IMAGE_ID}


def test_image_steps_detect_drift_with_a_read_only_check(registered):
    for name in ("spark-image-spark-1", "spark-image-spark-2"):
        check = _inputs(registered[name])["check"]
        assert "docker image inspect" in check and "docker load" not in check, name


def test_transfer_to_a_worker_runs_on_the_head_over_the_fabric(registered):
    step = _inputs(registered["spark-image-spark-2"])
    assert step["connection"]["name"] == "spark-1" and step["label"] == "spark-2"
    assert "FABRIC_SSH" in step["create"] and "docker load" in step["create"]


def test_image_id_is_exported(monkeypatch):
    outputs = {}

    def capture(name, value):
        outputs[name] = value

    monkeypatch.setattr(pulumi, "export", capture)
    _register(monkeypatch, pinned(dual_spark_stack_file()))
    assert "image_id" in outputs


def test_present_image_is_only_checked_on_every_node(registered_present):
    for name in ("spark-image-spark-1", "spark-image-spark-2"):
        step = _inputs(registered_present[name])
        assert "FABRIC_SSH" not in step["create"], name  # nothing is sent between nodes


# ---------- ModelWeights ----------


def test_containers_wait_for_every_copy_of_the_weights_and_restart_on_their_digest(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        assert any(d.endswith("::spark-weights-spark-1") for d in deps), name
        assert any(d.endswith("::spark-weights-spark-2") for d in deps), name
        assert label(registered[name], "spark-llm.weights") == WEIGHTS_DIGEST, name


def test_worker_copy_runs_on_the_head_and_follows_the_heads_copy(registered):
    sync = _inputs(registered["spark-weights-spark-2"])
    assert sync["connection"]["name"] == "spark-1" and sync["connection"].get("via") is None
    assert sync["triggers"][:2] == ["spark-weights-spark-1-id", WEIGHTS_DIGEST]
    assert any(d.endswith("::spark-weights-spark-1") for d in registered["spark-weights-spark-2"].dependencies)
    assert "FABRIC_SSH" in sync["create"] and "192.168.200.13" in sync["create"]
    after_tool = sync["check"].split("SPARK_LLM_MANIFEST_PY\n")[-1]
    assert "scan" in after_tool and "rsync" not in after_tool  # the drift check only reads


def test_copies_never_delete_weights_on_destroy_or_replace(registered):
    for name in ("spark-weights-spark-1", "spark-weights-spark-2"):
        assert not _inputs(registered[name]).get("delete"), name
    for name in ("spark-weights-spark-1-retention", "spark-weights-spark-2-retention"):
        retention = _inputs(registered[name])
        assert not retention.get("delete"), name
        assert "kept on pulumi destroy" in retention["create"] or "never deleted" in retention["create"], name


def test_purge_on_destroy_deletes_the_workers_copy_but_never_the_heads_source(monkeypatch):
    raw = dual_spark_raw()
    raw["model"]["purgeOnDestroy"] = True
    registered = _register(monkeypatch, raw)
    assert "purge" in _inputs(registered["spark-weights-spark-2-retention"])["delete"]
    # Kind head at model.path: the head's directory is the source itself.
    assert not _inputs(registered["spark-weights-spark-1-retention"]).get("delete")


def test_local_source_is_uploaded_from_here_with_its_digest_in_the_triggers(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    raw = dual_spark_raw()
    raw["model"]["source"] = {"kind": "local", "path": str(tmp_path / "model")}
    registered = _register(monkeypatch, raw)
    upload = registered["spark-weights-spark-1"]
    assert upload.type.endswith("LocalCommand")
    digest = _inputs(upload)["triggers"][-1]
    assert len(digest) == 64 and "rsync" in _inputs(upload)["create"]
    assert _inputs(registered["spark-weights-spark-2"])["triggers"][1] == digest
    assert label(registered["spark-engine-spark-2"], "spark-llm.weights") == digest


def test_hf_token_reaches_the_head_as_a_secret_0600_file(monkeypatch):
    raw = dual_spark_raw()
    raw["model"]["source"] = {"kind": "huggingface", "repo": "Qwen/Qwen3.5-122B-A10B-FP8", "revision": "0" * 40}
    raw["hfToken"] = "hf_secretsecret"
    registered = _register(monkeypatch, raw, secrets=("hfToken",))
    token = _inputs(registered["spark-weights-spark-1-hf-token"])
    assert token["mode"] == "0600" and token["path"] == "/home/aurora/spark-llm/hf.env"
    assert isinstance(token["content"], dict) and token["content"].get(SECRET_SIG)
    obtain = registered["spark-weights-spark-1"]
    assert "hf_secretsecret" not in json.dumps(_inputs(obtain))
    assert any(d.endswith("::spark-weights-spark-1-hf-token") for d in obtain.dependencies)


def test_api_key_reaches_only_the_head_as_a_secret_0600_file_and_never_a_command_line(monkeypatch):
    raw = dual_spark_raw()
    raw["apiKey"] = "sk-spark-0123456789abcdef"
    registered = _register(monkeypatch, raw, secrets=("apiKey",))
    key_file = _inputs(registered["spark-scripts-spark-1-api-key"])
    assert key_file["mode"] == "0600" and key_file["path"] == "/home/aurora/spark-llm/api-key.yaml"
    assert isinstance(key_file["content"], dict) and key_file["content"].get(SECRET_SIG)
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
        assert isinstance(label(registered[name], "spark-llm.api-key"), dict)
        assert label(registered[name], "spark-llm.api-key").get(SECRET_SIG)


def test_without_an_api_key_no_key_file_and_no_config_flag(registered):
    assert not any(name.endswith("-api-key") for name in registered)
    assert "--config" not in _inputs(registered["spark-engine-spark-1"])["command"]
