"""The engine group under Pulumi mocks: docker containers on each node's provider, in order, with their gates."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from components import bootstrap as stack
from spark_llm.plan.start.timeline import TIMELINE_PREFIX, parse_timeline
from tests.unit.graph_mocks import (
    FAKE_PRIVATE_KEY,
    SECRET_SIG,
    dual_spark_stack_file,
    inputs,
    label,
    pinned,
    register,
    without_secrets,
)

HEAD, WORKER = "spark-engine-spark-1", "spark-engine-spark-2"


def _depends_on(request, name: str) -> bool:
    return any(dep.endswith(f"::{name}") for dep in request.dependencies)


def test_each_node_has_one_engine_container_on_its_own_docker_provider(registered):
    for name, node in ((HEAD, "spark-1"), (WORKER, "spark-2")):
        assert registered[name].type == "docker:index/container:Container"
        assert f"::spark-docker-{node}::" in registered[name].provider
        assert inputs(registered[name])["name"] == "spark-llm-engine"


def test_docker_providers_pin_host_keys_and_reach_the_worker_through_the_head(registered):
    head, worker = inputs(registered["spark-docker-spark-1"]), inputs(registered["spark-docker-spark-2"])
    assert head["host"] == "ssh://aurora@10.1.230.180:22"
    assert worker["host"] == "ssh://aurora@192.168.200.13:22"
    opts = json.loads(worker["sshOpts"])  # a provider's inputs reach it as strings
    pinned_key = dual_spark_stack_file()["nodes"][1]["hostKey"]
    assert "StrictHostKeyChecking=yes" in opts and "UserKnownHostsFile=/dev/null" in opts
    assert f"KnownHostsCommand=/bin/echo spark-2 {pinned(dual_spark_stack_file())['nodes'][1]['hostKey']}" in opts
    assert pinned_key not in " ".join(opts)  # the committed placeholder was replaced by the real pin
    proxy = next(o for o in opts if o.startswith("ProxyCommand="))
    assert "-W %h:%p aurora@10.1.230.180" in proxy and "KnownHostsCommand=/bin/echo spark-1" in proxy
    assert "PRIVATE KEY" not in json.dumps(worker)  # a key path for OpenSSH, never key material


def test_commands_pin_host_keys_and_keep_the_private_key_secret(registered):
    wrapped = inputs(registered["spark-engine-spark-2-watch"])["connection"]
    # The key makes the whole connection a secret: encrypted in state, nowhere in plaintext.
    assert wrapped.get(SECRET_SIG) and "PRIVATE KEY" not in json.dumps(without_secrets(wrapped))
    conn = wrapped["value"]
    assert conn["host"] == "192.168.200.13" and conn["proxy"]["host"] == "10.1.230.180"
    assert conn["hostKey"].startswith("ssh-ed25519 ") and conn["proxy"]["hostKey"].startswith("ssh-ed25519 ")


def test_head_is_replaced_after_the_workers_and_every_container_before_its_successor(registered):
    head, worker = registered[HEAD], registered[WORKER]
    assert head.deleteBeforeReplace and worker.deleteBeforeReplace
    assert _depends_on(head, WORKER) and _depends_on(head, "spark-engine-spark-2-watch")
    assert label(head, "spark-llm.workers") == f"{WORKER}-id"  # a new worker replaces the head
    for key in ("spark-llm.group-revision", "spark-llm.generation", "spark-llm.script", "spark-llm.weights"):
        assert label(head, key) == label(worker, key) and label(head, key), key


def test_every_member_is_stopped_head_first_before_any_container_is_replaced(registered):
    stop_head, stop_worker = registered["spark-engine-stop-spark-1"], registered["spark-engine-stop-spark-2"]
    assert inputs(stop_head)["connection"]["value"]["host"] == "10.1.230.180"
    assert inputs(stop_worker)["connection"]["value"]["host"] == "192.168.200.13"
    assert "docker stop" in inputs(stop_head)["stdin"] and "spark-llm-engine" in inputs(stop_head)["stdin"]
    generation = label(registered[WORKER], "spark-llm.generation")
    assert generation in inputs(stop_head)["triggers"] and generation in inputs(stop_worker)["triggers"]
    assert _depends_on(stop_worker, "spark-engine-stop-spark-1")
    assert _depends_on(registered[WORKER], "spark-engine-stop-spark-2")


def test_every_nodes_memory_admission_runs_before_the_first_stop_exactly_when_the_group_restarts(registered):
    first = registered["spark-engine-stop-supervisor"]  # the dual-spark stack is supervised: it stops first
    stop_triggers = inputs(registered["spark-engine-stop-spark-1"])["triggers"][1:]  # after the script's digest
    for node in ("spark-1", "spark-2"):
        admit = registered[f"spark-engine-admit-{node}"]
        assert _depends_on(first, f"spark-engine-admit-{node}")
        # The stop steps' triggers, and the token that is new at every run while the group is to stop (none here:
        # the nodes are not looked at under mocks).
        assert inputs(admit)["triggers"] == [*stop_triggers, "unobserved"]
        spec = json.loads(inputs(admit)["stdin"])
        assert (spec["node"], spec["engine"], spec["ranks"], spec["drop_caches"]) == (node, "vllm", 2, False)
        assert spec["token"] == "unobserved"
    assert not [name for name in registered if name.endswith("-drop-caches")]  # opt-in


def test_a_crashed_worker_fails_its_watch_before_the_head_starts(registered):
    watch = registered["spark-engine-spark-2-watch"]
    assert inputs(watch)["triggers"][1:] == [f"{WORKER}-id"]
    assert "launch.sh watch spark-2" in inputs(watch)["stdin"]
    assert _depends_on(watch, WORKER)


def test_container_options_match_a_spark(registered):
    spec = inputs(registered[WORKER])
    assert spec["networkMode"] == "host" and spec["ipcMode"] == "host" and spec["init"] is True
    assert spec["gpus"] == "all" and spec["restart"] == "no" and spec["mustRun"] is True
    assert spec["devices"] == [{"hostPath": "/dev/infiniband", "containerPath": "/dev/infiniband"}]
    assert spec["capabilities"] == {"adds": ["IPC_LOCK"]}
    assert spec["ulimits"] == [{"name": "memlock", "soft": -1, "hard": -1}]
    volumes = {v["containerPath"]: v for v in spec["volumes"]}
    model = "/home/aurora/models/Qwen3.5-122B-A10B-FP8"
    assert volumes[model]["hostPath"] == model and volumes[model]["readOnly"] is True
    assert volumes["/spark-llm/launch.sh"]["hostPath"] == "/home/aurora/spark-llm/launch.sh"
    assert "readOnly" not in volumes["/root/.cache"]
    assert spec["entrypoints"] == ["/bin/bash", "/spark-llm/launch.sh", "run", "spark-2"]
    assert "TINI_KILL_PROCESS_GROUP=1" in spec["envs"] and "NCCL_SOCKET_IFNAME=enp1s0f0np0" in spec["envs"]


def test_the_readiness_gate_follows_the_head_and_reads_every_member(registered):
    ready = registered["spark-engine-ready"]
    assert ready.type == "command:local:Command"
    assert _depends_on(ready, "spark-engine-spark-1-watch")
    assert inputs(ready)["triggers"] == [f"{HEAD}-id"]
    spec = json.loads(inputs(ready)["stdin"])
    assert [(m["name"], m["role"]) for m in spec["members"]] == [("spark-1", "head"), ("spark-2", "worker")]
    assert inputs(ready)["create"].endswith("-m spark_llm.ops.readiness_gate")


def test_a_changed_gate_setting_keeps_the_last_starts_timeline(registered):
    """An update of the gate (a setting of its spec changed, nothing started) printed only a note, and the
    `start_timeline` output, read from its outputs, went empty: `spark-llm status` lost its last start after an
    upgrade that changed the gate's spec. Its update now gives the last start's outputs back."""
    ready = inputs(registered["spark-engine-ready"])
    assert ready["addPreviousOutputInEnv"] is True
    timeline = {"revision": "r1", "at": "2026-12-07T07:00:00Z", "nodes": {}}
    line = TIMELINE_PREFIX + json.dumps(timeline)
    for before in ({"PULUMI_COMMAND_STDERR": line + "\n"}, {"PULUMI_COMMAND_STDOUT": "progress\n" + line + "\n"}):
        run = subprocess.run(["bash", "-c", ready["update"]], input="{the spec}", env={**os.environ, **before},
                             capture_output=True, text=True, check=True)  # fmt: skip
        assert parse_timeline(run.stderr, run.stdout) == timeline, before
        assert "readiness gate settings recorded" in run.stdout


def test_a_missing_key_file_stops_the_program_naming_the_key(monkeypatch):
    raw = pinned(dual_spark_stack_file())
    raw["sshKeyPath"] = "/nonexistent/id_ed25519"
    with pytest.raises(stack.Refusal, match=r"spark-llm:sshKeyPath: cannot read the ssh private key /nonexistent"):
        register(monkeypatch, raw)


def test_a_key_file_others_can_read_stops_the_program_with_the_chmod_fix(monkeypatch, tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_text(FAKE_PRIVATE_KEY)
    key.chmod(0o644)
    raw = pinned(dual_spark_stack_file())
    raw["sshKeyPath"] = str(key)
    with pytest.raises(stack.Refusal) as err:
        register(monkeypatch, raw)
    assert (
        f"spark-llm:sshKeyPath: the ssh private key {key} is open to group or others (mode 0644); ssh refuses it"
        f" (UNPROTECTED PRIVATE KEY FILE). Run `chmod 600 {key}`" in str(err.value)
    )
    key.chmod(0o600)
    assert "spark-engine-spark-1" in register(monkeypatch, raw)


def test_each_node_first_takes_the_groups_ports_from_an_engine_of_a_model_no_longer_listed(registered):
    """A renamed model (other than the first) is a new group on the old one's ports: its first step on each node
    removes the old engine there, before the admission counts its memory and before any stop or start (issue 40).
    Made once with the group, no triggers: a restart of the group does not run it again."""
    for node, host in (("spark-1", "10.1.230.180"), ("spark-2", "192.168.200.13")):
        take = registered[f"spark-engine-take-ports-{node}"]
        assert inputs(take)["connection"]["value"]["host"] == host
        assert f"take_ports {node} spark-llm-engine 30000 20000\n" in inputs(take)["stdin"]
        assert inputs(take)["triggers"][1:] == []  # the script's digest alone
        assert _depends_on(registered[f"spark-engine-admit-{node}"], f"spark-engine-take-ports-{node}")
