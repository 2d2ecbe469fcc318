"""The pure plan: start order, one identical launch script, engine command lines, group revision."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan import node_files
from spark_llm.plan.container import container_spec

TEMPLATE = plan.LAUNCH_TEMPLATE.read_text()


def build(raw):
    return plan.build_plan(groups(parse(raw))[0], TEMPLATE)


def test_workers_start_before_the_head(raw_config):
    p = build(raw_config)
    assert p.start_order == ["spark-2", "spark-1"]
    assert [n.rank for n in p.nodes] == [0, 1] and p.head.name == "spark-1"


def test_worker_is_reached_through_the_head(raw_config):
    p = build(raw_config)
    worker = p.workers[0].ssh
    assert worker.via is not None and worker.via.name == "spark-1" and worker.via.host == "10.1.230.180"
    assert p.head.ssh.via is None


def test_each_node_gets_its_own_rank_and_command_in_its_container_spec(raw_config):
    p = build(raw_config)
    head, worker = (list(container_spec(p, n).command) for n in p.nodes)
    assert head[head.index("--node-rank") + 1] == "0" and worker[worker.index("--node-rank") + 1] == "1"
    assert "--host" in head and "--host" not in worker
    assert head[head.index("--dist-init-addr") + 1] == "192.168.200.12:20000"
    assert container_spec(p, p.workers[0]).entrypoint == ("/bin/bash", "/spark-llm/launch.sh", "run", "spark-2")


def test_switching_engine_kind_changes_the_group_revision_only(raw_config):
    sglang = build(raw_config)
    raw_config["engine"] = {"kind": "vllm", "executor": "native"}
    vllm = build(raw_config)
    assert sglang.group_revision != vllm.group_revision
    assert container_spec(vllm, vllm.head).command[:3] == ("vllm", "serve", "/home/aurora/models/Qwen3.5-122B-A10B-FP8")


def test_launch_script_is_valid_bash_and_fully_rendered(raw_config, tmp_path):
    script = build(raw_config).launch_script
    assert "@@" not in script
    path = tmp_path / "launch.sh"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_launch_script_refuses_an_unknown_node_and_a_bad_mode(raw_config, tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text(build(raw_config).launch_script)
    unknown = subprocess.run(["bash", str(path), "run", "spark-9", "true"], capture_output=True, text=True)
    assert unknown.returncode == 1 and "unknown node 'spark-9'" in unknown.stderr
    usage = subprocess.run(["bash", str(path), "launch", "spark-1"], capture_output=True, text=True)
    assert usage.returncode == 2 and "Usage:" in usage.stderr


def test_the_entrypoint_loads_the_env_file_literally_and_runs_the_command_as_given(raw_config, tmp_path):
    env_file = tmp_path / "engine.env"
    env_file.write_text('# a comment\nNCCL_DEBUG=INFO\nODD=a b\'c "d"\n\n')
    script = build(raw_config).launch_script.replace("ENV_FILE=/spark-llm/engine.env", f"ENV_FILE={env_file}")
    path = tmp_path / "launch.sh"
    path.write_text(script)
    argv = ["bash", str(path), "run", "spark-1", "bash", "-c", 'printf "%s\\n" "$ODD" "$NCCL_DEBUG" "$1"', "-", "x y'z"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith("starting spark-llm-engine on spark-1: rank=0 profile=sglang")
    assert out[1:] == ['a b\'c "d"', "INFO", "x y'z"]


def test_group_revision_changes_with_what_restarts_the_group(raw_config):
    base = build(raw_config).group_revision
    assert build(raw_config).group_revision == base  # deterministic
    for key, value in [("image", {"ref": "lmsysorg/sglang:other"}), ("engine", {"env": {"NCCL_DEBUG": "INFO"}})]:
        changed = dict(raw_config, **{key: value})
        assert build(changed).group_revision != base, key
    renamed_model = dict(raw_config, model=dict(raw_config["model"], name="other"))
    assert build(renamed_model).group_revision != base


def test_same_script_on_every_node(raw_config):
    p = build(raw_config)
    assert {n.script_path for n in p.nodes} == {"/home/aurora/spark-llm/launch.sh"}


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("engine", [{"kind": "sglang"}, {"kind": "vllm"}, {"kind": "vllm", "executor": "ray"}])
def test_rendered_script_passes_shellcheck(raw_config, tmp_path, engine):
    raw_config["engine"] = engine
    path = tmp_path / "launch.sh"
    path.write_text(build(raw_config).launch_script)
    result = subprocess.run(["shellcheck", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("key", ["sk-plain", 'with "quotes" and \\ backslash', "ключ # not a comment", "a: b\nc"])
def test_api_key_file_is_yaml_the_engines_read_back_exactly(raw_config, key):
    import yaml

    p = plan.build_plan(groups(parse({**raw_config, "apiKey": key}))[0], TEMPLATE)
    assert p.api_config is not None and yaml.safe_load(p.api_config) == {"api-key": key}
    assert p.api_config_path == "/home/aurora/spark-llm/api-key.yaml"
    assert key not in p.launch_script and key not in p.env_file and key not in p.group_revision


@pytest.mark.parametrize("profile", [("sglang", "native"), ("vllm", "native"), ("vllm", "ray")])
def test_only_the_api_serving_rank_gets_the_key_file_as_config(raw_config, profile):
    kind, executor = profile
    raw = {**raw_config, "apiKey": "sk-x", "engine": {**raw_config.get("engine", {}), "kind": kind}}
    raw["engine"]["executor"] = executor
    launches = plan.node_launches(parse(raw))
    head, worker = (" ".join(launches[n].argv) for n in ("spark-1", "spark-2"))
    assert "--config /home/aurora/spark-llm/api-key.yaml" in head
    assert "--config" not in worker and "sk-x" not in head + worker


def test_adding_a_key_changes_the_revision_but_rotating_it_does_not_show_in_it(raw_config):
    bare = build(raw_config).group_revision
    first = plan.build_plan(groups(parse({**raw_config, "apiKey": "sk-one"}))[0], TEMPLATE)
    second = plan.build_plan(groups(parse({**raw_config, "apiKey": "sk-two"}))[0], TEMPLATE)
    assert bare != first.group_revision == second.group_revision  # rotation restarts via the file's digest
    assert first.api_config != second.api_config


def test_container_specs_for_a_spark_and_for_the_sim(raw_config):
    raw_config["network"] = {"fabricInterfaces": ["enp1s0f0np0"], "roceDevices": ["rocep1s0f0"]}
    spark = container_spec(build(raw_config), build(raw_config).head)
    assert spark.gpus and spark.rdma
    raw_config["network"] = {"fabricInterfaces": ["eth0"]}
    raw_config["engine"] = {"gpus": False}
    sim = container_spec(build(raw_config), build(raw_config).head)
    assert not sim.gpus and not sim.rdma


def test_every_engine_container_has_an_init_that_signals_its_process_group(raw_config):
    p = build(raw_config)
    for node in p.nodes:
        assert container_spec(p, node).env["TINI_KILL_PROCESS_GROUP"] == "1"


def test_only_the_head_mounts_the_api_key_file_and_the_weights_are_read_only(raw_config):
    p = build({**raw_config, "apiKey": "sk-x"})
    head, worker = (container_spec(p, n) for n in p.nodes)
    key = "/home/aurora/spark-llm/api-key.yaml"
    assert any(m.source == key and m.read_only for m in head.mounts)
    assert not any(m.source == key for m in worker.mounts)
    weights = next(m for m in worker.mounts if m.target == p.config.model.path)
    assert weights.read_only and not next(m for m in worker.mounts if m.target == "/root/.cache").read_only


@pytest.mark.parametrize(
    ("kind", "executor", "ray_auth"), [("vllm", "ray", True), ("vllm", "native", False), ("sglang", "native", False)]
)
def test_only_a_ray_group_gets_the_token_file_on_every_node_and_its_drift_probe(raw_config, kind, executor, ray_auth):
    p = build({**raw_config, "engine": {"kind": kind, "executor": executor}})
    assert p.ray_auth is ray_auth
    for node in p.nodes:
        token = f"{node.remote_dir}/ray-token"
        mounts = {m.target: m for m in container_spec(p, node).mounts}
        assert ("/spark-llm/ray-token" in mounts) is ray_auth
        if ray_auth:
            assert mounts["/spark-llm/ray-token"].source == token and mounts["/spark-llm/ray-token"].read_only
        # The probe of every program run reads the file's digest: removed or edited on a node, `up` writes it again.
        assert (token in [f.path for f in node_files.launch_files(p, node)]) is ray_auth


def test_no_ray_token_on_any_rendered_command_line_or_in_the_env_file(raw_config):
    p = build({**raw_config, "engine": {"kind": "vllm", "executor": "ray"}})
    for node in p.nodes:
        spec = container_spec(p, node)
        rendered = " ".join([*spec.entrypoint, *spec.command, *(f"{k}={v}" for k, v in spec.env.items())])
        assert "RAY_AUTH_TOKEN_PATH=/spark-llm/ray-token" in rendered and "RAY_AUTH_MODE=token" in rendered
        # Only the file's path: Ray's own variable for the token's value is never set.
        assert "RAY_AUTH_TOKEN=" not in rendered
    assert "RAY_AUTH" not in p.env_file and "RAY_AUTH" not in p.launch_script


@pytest.mark.parametrize(
    ("listen", "on_head", "endpoint"),
    [
        # Every address: the head probes loopback, this machine uses the head's host.
        ("0.0.0.0", "127.0.0.1", "http://10.1.230.180:30000"),
        ("::", "[::1]", "http://10.1.230.180:30000"),
        # One address: loopback finds nothing there; that address, from the head and from here.
        ("192.168.1.10", "192.168.1.10", "http://192.168.1.10:30000"),
        ("127.0.0.1", "127.0.0.1", "http://127.0.0.1:30000"),
        ("fd00::5", "[fd00::5]", "http://[fd00::5]:30000"),
    ],
)
def test_the_api_is_probed_and_published_where_engine_host_listens(raw_config, listen, on_head, endpoint):
    raw_config.setdefault("engine", {})["host"] = listen
    p = build(raw_config)
    assert (p.api_address, p.endpoint) == (on_head, endpoint)
    head = list(container_spec(p, p.head).command)
    assert head[head.index("--host") + 1] == listen


def test_engine_host_restarts_the_group_only_when_set_to_another_address(raw_config):
    before = build(raw_config).group_revision
    raw_config.setdefault("engine", {})["host"] = "0.0.0.0"
    assert build(raw_config).group_revision == before  # the default: an upgrade restarts nothing
    raw_config["engine"]["host"] = "192.168.1.10"
    assert build(raw_config).group_revision != before
