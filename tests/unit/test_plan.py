"""The pure plan: start order, one identical launch script, engine command lines, group revision."""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

from spark_llm import plan
from spark_llm.config import parse

TEMPLATE = plan.TEMPLATE_PATH.read_text()


def build(raw):
    return plan.build_plan(parse(raw), TEMPLATE)


def test_workers_start_before_the_head(raw_config):
    p = build(raw_config)
    assert p.start_order == ["spark-2", "spark-1"]
    assert [n.rank for n in p.nodes] == [0, 1] and p.head.name == "spark-1"


def test_worker_is_reached_through_the_head(raw_config):
    p = build(raw_config)
    worker = p.workers[0].ssh
    assert worker.via is not None and worker.via.name == "spark-1" and worker.via.host == "10.1.230.180"
    assert p.head.ssh.via is None


def test_each_node_gets_its_own_rank_in_the_one_script(raw_config, tmp_path):
    script = build(raw_config).launch_script
    probe = script.split("# ---- end of rendered values ----")[0] + textwrap.dedent(
        """
        die() { echo "$*" >&2; exit 1; }
        for n in spark-1 spark-2; do node_launch "$n"; printf '%s|' "$n" "${CMD[@]}"; echo; done
        """
    )
    path = tmp_path / "probe.sh"
    path.write_text(probe)
    lines = subprocess.run(["bash", str(path)], capture_output=True, text=True, check=True).stdout.splitlines()
    head, worker = (line.split("|") for line in lines)
    assert head[head.index("--node-rank") + 1] == "0" and worker[worker.index("--node-rank") + 1] == "1"
    assert "--host" in head and "--host" not in worker
    assert head[head.index("--dist-init-addr") + 1] == "192.168.200.12:20000"


def test_switching_engine_kind_changes_the_group_revision_only(raw_config):
    sglang = build(raw_config)
    raw_config["engine"] = {"kind": "vllm", "executor": "native"}
    vllm = build(raw_config)
    assert sglang.group_revision != vllm.group_revision
    assert "vllm serve /home/aurora/models/Qwen3.5-122B-A10B-FP8" in vllm.launch_script.replace("'", "")


def test_launch_script_is_valid_bash_and_fully_rendered(raw_config, tmp_path):
    script = build(raw_config).launch_script
    assert "@@" not in script
    path = tmp_path / "launch.sh"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_launch_script_refuses_unknown_node_and_wrong_role(raw_config, tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text(build(raw_config).launch_script)
    unknown = subprocess.run(["bash", str(path), "start", "worker", "spark-9"], capture_output=True, text=True)
    assert unknown.returncode == 1 and "unknown node 'spark-9'" in unknown.stderr
    wrong = subprocess.run(["bash", str(path), "start", "worker", "spark-1"], capture_output=True, text=True)
    assert wrong.returncode == 1 and "is the head" in wrong.stderr
    usage = subprocess.run(["bash", str(path), "launch"], capture_output=True, text=True)
    assert usage.returncode == 2 and "Usage:" in usage.stderr


def test_user_flags_with_spaces_survive_quoting(raw_config, tmp_path):
    raw_config["engine"] = {"flags": ["--chat-template", "a b'c"]}
    script = build(raw_config).launch_script
    probe = script.split("# ---- end of rendered values ----")[0] + 'node_launch spark-1; printf "%s\\n" "${CMD[@]}"\n'
    path = tmp_path / "probe.sh"
    path.write_text(probe)
    out = subprocess.run(["bash", str(path)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-2:] == ["--chat-template", "a b'c"]


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

    p = plan.build_plan(parse({**raw_config, "apiKey": key}), TEMPLATE)
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
    first = plan.build_plan(parse({**raw_config, "apiKey": "sk-one"}), TEMPLATE)
    second = plan.build_plan(parse({**raw_config, "apiKey": "sk-two"}), TEMPLATE)
    assert bare != first.group_revision == second.group_revision  # rotation restarts via the file's digest
    assert first.api_config != second.api_config
