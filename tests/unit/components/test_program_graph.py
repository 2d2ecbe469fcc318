"""The dual-spark stack under Pulumi mocks: the resource graph the real program registers, no node touched.

A MockMonitor subclass records every RegisterResource request, so the tests assert what the engine would be
told: types, parents, depends_on edges, delete_before_replace, triggers and secrets.
"""

from __future__ import annotations

import base64
import json

import pulumi
import pytest
import yaml

from components.commands import run_stdin_script
from spark_llm.config import ConfigError, parse
from tests.conftest import HEAD_KEY, WORKER_KEY, dual_spark_raw
from tests.unit.graph_mocks import (
    FAKE_PRIVATE_KEY,
    IMAGE_ID,
    RAY_TOKEN,
    ROOT,
    SECRET_SIG,
    WEIGHTS_DIGEST,
    dual_spark_stack_file,
    label,
    pinned,
)
from tests.unit.graph_mocks import inputs as _inputs
from tests.unit.graph_mocks import register as _register
from tests.unit.graph_mocks import without_secrets as _without_secrets

COMMAND = "command:remote:Command"
LOCAL_COMMAND = "command:local:Command"
REMOTE_IMAGE = "docker:index/remoteImage:RemoteImage"


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
    assert types["spark-weights"] == "spark-llm:components:ModelWeights"
    assert types["spark-engine-ready"] == LOCAL_COMMAND
    containers = sorted(n for n, t in types.items() if t == "docker:index/container:Container")
    assert containers == ["spark-engine-spark-1", "spark-engine-spark-2"]
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


def _file_content(stdin: str) -> str:
    """What a file step writes (base64 in its script)."""
    return base64.b64decode(stdin.split("<<'SPARK_LLM_EOF'\n")[1].split("\nSPARK_LLM_EOF")[0]).decode()


def _connection(request) -> dict:
    """A command's connection (pulumi-command keeps all of it secret: it carries the private key)."""
    connection = _inputs(request)["connection"]
    assert _is_secret(connection)
    return connection["value"]


def _is_secret(value) -> bool:
    return isinstance(value, dict) and bool(value.get(SECRET_SIG))


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


def test_containers_wait_for_the_image_on_every_node(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        for step in ("spark-image-spark-1-verify", "spark-image-spark-2-verify", "spark-image-spark-2-image"):
            assert any(d.endswith(f"::{step}") for d in deps), (name, step)


def test_a_new_image_id_restarts_the_group(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        assert _inputs(registered[name])["image"] == IMAGE_ID, name


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


def test_unobserved_steps_carry_the_unobserved_token(registered):
    for name in ("spark-image-spark-1", "spark-image-spark-2-verify"):
        assert "unobserved" in _inputs(registered[name])["triggers"], name
    assert "spark-2=unobserved" in _inputs(registered["spark-weights-workers"])["triggers"]
    assert _inputs(registered["spark-image-spark-2-image"])["triggers"]["token"] == "unobserved"


def test_observed_drift_replaces_only_the_drifted_nodes_steps(monkeypatch):
    from spark_llm.remote.observe import NodeObservation

    head_token, worker_token = "tok-head", "tok-worker"
    observations = {
        "spark-1": NodeObservation(
            node="spark-1",
            image=f"{IMAGE_ID} linux/arm64",
            tokens={"image": f"{head_token} {IMAGE_ID}", "weights": f"{head_token} {WEIGHTS_DIGEST}"},
            facts={"weights": WEIGHTS_DIGEST},
        ),
        # The worker's image was removed since the last up; its weights are as they were.
        "spark-2": NodeObservation(
            node="spark-2",
            image="",
            tokens={"image": f"{worker_token} {IMAGE_ID}", "weights": f"{worker_token} {WEIGHTS_DIGEST}"},
            facts={"weights": WEIGHTS_DIGEST},
        ),
    }
    warnings = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warnings.append(msg))
    registered = _register(monkeypatch, pinned(dual_spark_stack_file()), observations=observations)
    assert head_token in _inputs(registered["spark-image-spark-1"])["triggers"]
    assert head_token in _inputs(registered["spark-image-spark-1-verify"])["triggers"]
    repair = [t for t in _inputs(registered["spark-image-spark-2"])["triggers"] if str(t).startswith("repair-")]
    assert len(repair) == 1
    assert _inputs(registered["spark-image-spark-2-image"])["triggers"]["token"] == repair[0]
    assert repair[0] in _inputs(registered["spark-image-spark-2-verify"])["stdin"]  # recorded once repaired
    assert f"spark-2={worker_token}" in _inputs(registered["spark-weights-workers"])["triggers"]
    assert [w for w in warnings if "drift" in w] == [
        f"drift: image on spark-2: gone (was {IMAGE_ID}) (image {dual_spark_stack_file()['image']['ref']});"
        " `pulumi up` repairs it"
    ]


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


# ---------- ModelWeights ----------


def test_containers_wait_for_every_copy_of_the_weights_and_restart_on_their_digest(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        assert any(d.endswith("::spark-weights-spark-1") for d in deps), name
        assert any(d.endswith("::spark-weights-workers") for d in deps), name
        assert label(registered[name], "spark-llm.weights") == WEIGHTS_DIGEST, name


def test_worker_copy_runs_on_the_head_and_follows_the_heads_copy(registered):
    sync = _inputs(registered["spark-weights-workers"])
    connection = _connection(registered["spark-weights-workers"])
    assert connection["host"] == "10.1.230.180" and "proxy" not in connection
    assert sync["triggers"][1:3] == ["spark-weights-spark-1-id", WEIGHTS_DIGEST]
    assert any(d.endswith("::spark-weights-spark-1") for d in registered["spark-weights-workers"].dependencies)
    assert "fanout.py" in sync["stdin"] and '"address": "192.168.200.13"' in sync["stdin"]
    assert "/home/aurora/spark-llm/state" in sync["stdin"]  # records its token on the worker


def test_copies_never_delete_weights_on_destroy_or_replace(registered):
    for name in ("spark-weights-spark-1", "spark-weights-workers"):
        assert not _inputs(registered[name]).get("delete"), name
    for name in ("spark-weights-spark-1-retention", "spark-weights-spark-2-retention"):
        retention = _inputs(registered[name])
        assert not retention.get("delete"), name
        assert "kept on pulumi destroy" in retention["stdin"] or "never deleted" in retention["stdin"], name


def test_purge_on_destroy_deletes_the_workers_copy_but_never_the_heads_source(monkeypatch):
    raw = dual_spark_raw()
    raw["model"]["purgeOnDestroy"] = True
    registered = _register(monkeypatch, raw)
    worker = _inputs(registered["spark-weights-spark-2-retention"])
    assert worker["delete"] == run_stdin_script("SPARK_LLM_PHASE=delete ") and '"$tool" purge' in worker["stdin"]
    # Kind head at model.path: the head's directory is the source itself.
    head = _inputs(registered["spark-weights-spark-1-retention"])
    assert not head.get("delete") and '"$tool" purge' not in head["stdin"]


def test_head_copy_update_reprints_its_digest(registered):
    """A new key is an update; pulumi-command keeps the update's stdout, which the group's digest is read from."""
    update = _inputs(registered["spark-weights-spark-1"])["update"]
    assert ".spark-llm-manifest.json" in update and "spark-llm-manifest " in update


def test_local_source_is_uploaded_from_here_with_its_digest_in_the_triggers(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    raw = dual_spark_raw()
    raw["model"]["source"] = {"kind": "local", "path": str(tmp_path / "model")}
    registered = _register(monkeypatch, raw)
    upload = registered["spark-weights-spark-1"]
    assert upload.type == LOCAL_COMMAND
    inputs = _inputs(upload)
    digest = inputs["triggers"][-2]
    assert len(digest) == 64 and "rsync" in inputs["stdin"] and inputs["triggers"][-1] == "unobserved"
    assert "KnownHostsCommand" in inputs["environment"]["SPARK_LLM_SSH"]
    assert "PRIVATE KEY" not in json.dumps(inputs)
    assert _inputs(registered["spark-weights-workers"])["triggers"][2] == digest
    assert label(registered["spark-engine-spark-2"], "spark-llm.weights") == digest


def test_hf_token_reaches_the_head_as_a_secret_0600_file(monkeypatch):
    raw = dual_spark_raw()
    raw["model"]["source"] = {"kind": "huggingface", "repo": "Qwen/Qwen3.5-122B-A10B-FP8", "revision": "0" * 40}
    raw["hfToken"] = "hf_secretsecret"
    registered = _register(monkeypatch, raw, secrets=("hfToken",))
    token = _inputs(registered["spark-weights-spark-1-hf-token"])
    assert _is_secret(token["stdin"]) and token["delete"].endswith("else rm -f /home/aurora/spark-llm/hf.env; fi")
    obtain = registered["spark-weights-spark-1"]
    assert "hf_secretsecret" not in json.dumps(_inputs(obtain))
    assert any(d.endswith("::spark-weights-spark-1-hf-token") for d in obtain.dependencies)
    for name, request in registered.items():
        assert "hf_secretsecret" not in json.dumps(_without_secrets(_inputs(request))), name


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
