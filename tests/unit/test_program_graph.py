"""The dual-spark stack under Pulumi mocks: the resource graph the real program registers, no node touched.

A MockMonitor subclass records every RegisterResource request, so the tests assert what the engine would be
told: types, parents, depends_on edges, delete_before_replace, triggers and secrets.
"""

from __future__ import annotations

import base64
import json
import runpy
import tempfile
from pathlib import Path

import pulumi
import pytest
import yaml
from google.protobuf import json_format
from pulumi.runtime.mocks import MockMonitor

from spark_llm import observe
from spark_llm.commands import run_stdin_script
from spark_llm.config import ConfigError, parse
from tests.conftest import HEAD_KEY, WORKER_KEY, dual_spark_raw

ROOT = Path(__file__).resolve().parents[2]
SECRET_SIG = "4dabf18193072939515e22adb298388d"
IMAGE_ID = "sha256:" + "c" * 64
WEIGHTS_DIGEST = "ab" * 32


COMMAND = "command:remote:Command"
LOCAL_COMMAND = "command:local:Command"
REMOTE_IMAGE = "docker:index/remoteImage:RemoteImage"
FAKE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nfake-key-for-mocks\n-----END OPENSSH PRIVATE KEY-----\n"


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        outs = dict(args.inputs)
        if args.typ == REMOTE_IMAGE:
            outs["imageId"] = IMAGE_ID
        elif args.name.startswith("spark-weights-"):
            outs["stdout"] = f"copied\nspark-llm-manifest {WEIGHTS_DIGEST} 3 1024\n"
        elif args.typ.endswith("EngineContainer"):
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


def test_unreadable_key_stops_the_program_before_any_node_is_probed(monkeypatch):
    with pytest.raises(Exception, match=r"spark-llm:sshKeyPath: cannot read the ssh private key"):
        _register(monkeypatch, pinned(dual_spark_stack_file()), key=False)
    assert _register.observed == []  # type: ignore[attr-defined]


def test_committed_dual_spark_file_asks_for_real_host_keys():
    with pytest.raises(ConfigError, match=r"nodes\[0\]\.hostKey: is the placeholder.*ssh-keyscan"):
        parse(dual_spark_stack_file())


def _register(
    monkeypatch, raw: dict, secrets: tuple[str, ...] = (), observations: dict | None = None, key: bool = True
) -> dict:
    """Run __main__.py for `raw` under mocks; return {name: RegisterResource request}.

    Mocks answer every resource registration and the nodes are never probed (`observations` stands for what
    spark_llm.observe would have read; None: not observed): nothing is sent to the stack's addresses (real
    machines elsewhere). `secrets` are the keys given as Pulumi secrets. The ssh key is a fake one in a
    temporary HOME (the program reads it once, for pulumi-command's connections).
    """
    home = Path(tempfile.mkdtemp(prefix="spark-llm-home-"))
    (home / ".ssh").mkdir()
    if key:
        (home / ".ssh" / "id_ed25519").write_text(FAKE_KEY)
    monkeypatch.setenv("HOME", str(home))
    observed = []

    def fake_observe(plan, extra=None):
        observed.append(plan)
        return observations

    monkeypatch.setattr(observe, "observe", fake_observe)
    _register.observed = observed  # type: ignore[attr-defined]
    monitor = RecordingMonitor(Mocks())
    pulumi.runtime.set_mocks(Mocks(), project="spark-llm", stack="dual-spark", preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(
        {f"spark-llm:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()},
        [f"spark-llm:{k}" for k in secrets],
    )
    monkeypatch.chdir(ROOT)

    @pulumi.runtime.test
    def run():
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    run()
    return {r.name: r for r in monitor.requests}


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
    assert types["spark-engine-ready"].endswith("GroupReady")
    containers = sorted(n for n, t in types.items() if t.endswith("EngineContainer"))
    assert containers == ["spark-engine-spark-1", "spark-engine-spark-2"]
    # The real providers only: no dynamic resource is left in these three components.
    commands = sorted(n for n, t in types.items() if t == COMMAND)
    assert commands == [
        "spark-image-spark-1",
        "spark-image-spark-1-verify",
        "spark-image-spark-2",
        "spark-image-spark-2-verify",
        "spark-scripts-spark-1-env",
        "spark-scripts-spark-1-script",
        "spark-scripts-spark-2-env",
        "spark-scripts-spark-2-script",
        "spark-weights-spark-1",
        "spark-weights-spark-1-retention",
        "spark-weights-spark-2",
        "spark-weights-spark-2-retention",
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
    assert s1["create"] == run_stdin_script() and s1["delete"].endswith("; rm -f /home/aurora/spark-llm/launch.sh")
    env = registered["spark-scripts-spark-2-env"]
    assert _is_secret(_inputs(env)["stdin"]), "env file content must be a secret"
    assert _is_secret(_inputs(env)["triggers"][0])  # its digest too
    assert _inputs(env)["delete"].endswith("; rm -f /home/aurora/spark-llm/engine.env")
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
    assert conn["privateKey"] == FAKE_KEY and conn["proxy"]["privateKey"] == FAKE_KEY
    for name, request in registered.items():
        assert "fake-key-for-mocks" not in json.dumps(_without_secrets(_inputs(request))), name
    head = _connection(registered["spark-image-spark-1"])
    assert head["host"] == "10.1.230.180" and "proxy" not in head
    # A connection (key, user, port) is no trigger: its change is an update that only says so.
    assert "connection settings recorded" in _inputs(registered["spark-image-spark-1"])["update"]


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


def test_containers_wait_for_the_image_on_every_node(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        for step in ("spark-image-spark-1-verify", "spark-image-spark-2-verify", "spark-image-spark-2-image"):
            assert any(d.endswith(f"::{step}") for d in deps), (name, step)


def test_a_new_image_id_restarts_the_group(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        assert IMAGE_ID in _inputs(registered[name])["triggers"], name


def test_each_node_image_comes_from_its_own_docker_provider_and_is_never_removed(registered):
    for node in ("spark-1", "spark-2"):
        request = registered[f"spark-image-{node}-image"]
        inputs = _inputs(request)
        assert inputs["name"] == "lmsysorg/sglang:spark" and inputs["keepLocally"] is True
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
    for name in ("spark-image-spark-1", "spark-image-spark-2-verify", "spark-weights-spark-2"):
        assert "unobserved" in _inputs(registered[name])["triggers"], name
    assert _inputs(registered["spark-image-spark-2-image"])["triggers"]["token"] == "unobserved"


def test_observed_drift_replaces_only_the_drifted_nodes_steps(monkeypatch):
    from spark_llm.observe import NodeObservation

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
    assert worker_token in _inputs(registered["spark-weights-spark-2"])["triggers"]
    assert [w for w in warnings if "drift" in w] == [
        f"drift: image on spark-2: gone (was {IMAGE_ID}) (image lmsysorg/sglang:spark); `pulumi up` repairs it"
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
    ssh = inputs["environment"]["SPARK_LLM_SSH"]
    assert "KnownHostsCommand=/bin/echo spark-1 ssh-ed25519" in ssh and "-i " in ssh
    assert "PRIVATE KEY" not in json.dumps(inputs)
    assert inputs["environment"]["SPARK_LLM_SSH_TARGET"] == "aurora@10.1.230.180"
    assert any(d.endswith("::spark-image-spark-1") for d in registered["spark-image-spark-1-image"].dependencies)


# ---------- ModelWeights ----------


def test_containers_wait_for_every_copy_of_the_weights_and_restart_on_their_digest(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        assert any(d.endswith("::spark-weights-spark-1") for d in deps), name
        assert any(d.endswith("::spark-weights-spark-2") for d in deps), name
        assert WEIGHTS_DIGEST in _inputs(registered[name])["triggers"], name


def test_worker_copy_runs_on_the_head_and_follows_the_heads_copy(registered):
    sync = _inputs(registered["spark-weights-spark-2"])
    connection = _connection(registered["spark-weights-spark-2"])
    assert connection["host"] == "10.1.230.180" and "proxy" not in connection
    assert sync["triggers"][1:3] == ["spark-weights-spark-1-id", WEIGHTS_DIGEST]
    assert any(d.endswith("::spark-weights-spark-1") for d in registered["spark-weights-spark-2"].dependencies)
    assert "FABRIC_SSH" in sync["stdin"] and "192.168.200.13" in sync["stdin"]
    assert "/home/aurora/spark-llm/state" in sync["stdin"]  # records its token on the worker


def test_copies_never_delete_weights_on_destroy_or_replace(registered):
    for name in ("spark-weights-spark-1", "spark-weights-spark-2"):
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
    assert _inputs(registered["spark-weights-spark-2"])["triggers"][2] == digest
    assert digest in _inputs(registered["spark-engine-spark-2"])["triggers"]


def test_hf_token_reaches_the_head_as_a_secret_0600_file(monkeypatch):
    raw = dual_spark_raw()
    raw["model"]["source"] = {"kind": "huggingface", "repo": "Qwen/Qwen3.5-122B-A10B-FP8", "revision": "0" * 40}
    raw["hfToken"] = "hf_secretsecret"
    registered = _register(monkeypatch, raw, secrets=("hfToken",))
    token = _inputs(registered["spark-weights-spark-1-hf-token"])
    assert _is_secret(token["stdin"]) and token["delete"].endswith("; rm -f /home/aurora/spark-llm/hf.env")
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
    assert key_file["delete"].endswith("; rm -f /home/aurora/spark-llm/api-key.yaml")
    assert _is_secret(key_file["stdin"]) and _is_secret(key_file["triggers"][0])
    assert "spark-scripts-spark-2-api-key" not in registered  # the worker serves no API
    # The launch script (the engines' command lines) carries the file's path, never the key.
    script = _inputs(registered["spark-scripts-spark-1-script"])["stdin"]
    assert "--config /home/aurora/spark-llm/api-key.yaml" in _file_content(script)
    for name, request in registered.items():
        # Only inside Pulumi secrets (encrypted in state), nowhere in plain inputs.
        assert "sk-spark-0123456789abcdef" not in json.dumps(_without_secrets(_inputs(request))), name
    # The readiness gate authenticates with the key as a secret, kept secret in its outputs too.
    ready = registered["spark-engine-ready"]
    assert _inputs(ready)["api_key"].get(SECRET_SIG) and "api_key" in ready.additionalSecretOutputs
    # A new key restarts the group: every container's triggers carry the file's (secret) digest.
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        assert "triggers" in registered[name].additionalSecretOutputs
        assert any(isinstance(t, dict) and t.get(SECRET_SIG) for t in _inputs(registered[name])["triggers"])


def test_without_an_api_key_no_key_file_and_no_config_flag(registered):
    assert not any(name.endswith("-api-key") for name in registered)
    script = _inputs(registered["spark-scripts-spark-1-script"])["stdin"]
    assert "--config" not in _file_content(script)


def _without_secrets(value):
    """The inputs with every Pulumi secret's value left out: what state would hold in plaintext."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG):
            return "[secret]"
        return {k: _without_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_secrets(v) for v in value]
    return value
