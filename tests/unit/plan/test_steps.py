"""spark_llm.plan.steps: every node step resolved in the plan, and the rules that keep it there (components read no
config; each node-side bash function has one definition, in scripts/lib/)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment, firewall, node_files, supervisor, supervisor_key
from spark_llm.plan.drift import owner_watch_script
from spark_llm.plan.image import steps as image
from spark_llm.plan.scripts import BASH_LIB_DIR, PROJECT_DIR, bash_lib
from spark_llm.plan.steps import build_steps
from spark_llm.plan.weights import fanout as weights_fanout
from spark_llm.plan.weights import retention
from spark_llm.plan.weights import steps as weights
from tests.conftest import dual_spark_raw

TOOL = weights.manifest_tool()


def build(raw):
    cfg = groups(parse(raw))[0]
    return cfg, deployment.build_plan(cfg, deployment.LAUNCH_TEMPLATE.read_text())


@pytest.mark.parametrize(
    "source",
    [
        None,
        {"kind": "head", "path": "/srv/weights"},
        {"kind": "huggingface", "repo": "Qwen/Q", "revision": "0" * 40},
    ],
)
def test_the_weights_steps_are_the_renderers_output_for_the_config(source):
    raw = dual_spark_raw()
    if source:
        raw["model"]["source"] = source
    raw["hfToken"] = "hf_x"
    cfg, p = build(raw)
    steps = build_steps(p).weights
    head, workers = p.head, list(p.workers)
    assert steps.head_script("tok") == weights.render_obtain(cfg, head, TOOL, "tok")
    tokens = {n.name: f"t-{n.name}" for n in p.nodes}
    fanout = weights_fanout.render_fanout(cfg, head, workers, TOOL, weights_fanout.fanout_sources(), tokens, "weights")
    assert steps.fanout_script(tokens) == fanout
    for node in p.nodes:
        assert steps.retention[node.name] == retention.render_retention(cfg, node, TOOL)
        assert steps.probes[node.name] == weights.render_probe(cfg, node, TOOL)
    assert (steps.hf_env_script is not None) == (cfg.model.effective_source.kind == "huggingface")


def test_a_local_source_is_uploaded_from_its_resolved_directory(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "model")
    raw = dual_spark_raw()
    raw["model"]["source"] = {"kind": "local", "path": str(tmp_path / "link")}
    cfg, p = build(raw)
    steps = build_steps(p).weights
    assert steps.local_dir == str((tmp_path / "model").resolve())
    assert steps.head_script("tok") == weights.render_upload(cfg, p.head, TOOL, steps.local_dir, "tok")


def test_each_node_probes_its_launch_files_its_weights_and_while_the_firewall_is_off_its_listeners():
    _, p = build(dual_spark_raw())
    steps = build_steps(p)
    for node in p.nodes:
        paths = [f.path for f in steps.files[node.name]]
        assert paths[:2] == [node.script_path, node.env_path]
        listeners = firewall.probe(p)
        assert "ss -Hltn" in listeners
        # The supervisor (on by default): its state and container on the head, its key's line on a worker.
        supervised = supervisor.probe(p, node) + supervisor_key.probe(p, node)
        assert supervised and ("supervisor-state" in supervised) == (node.role == "head")
        assert steps.probes[node.name] == (
            node_files.probe(paths) + steps.weights.probes[node.name] + supervised + listeners
        )


def test_the_fabric_key_and_the_api_key_are_plan_fields():
    raw = dual_spark_raw()
    raw["apiKey"] = "sk-1"
    raw["network"] = {**raw.get("network", {}), "fabricKeyPath": "/home/aurora/.ssh/fabric"}
    _, p = build(raw)
    assert p.api_key == "sk-1" and p.fabric_key_path == "/home/aurora/.ssh/fabric"
    assert weights_fanout.fanout_plan(p.config, p.head, list(p.workers), {"spark-2": "t"}, "w")["fabric_key"] == (
        p.fabric_key_path
    )
    assert [n.config_key for n in p.nodes] == ["spark-llm:nodes[0]", "spark-llm:nodes[1]"]


def test_the_watch_step_records_its_owner_then_watches():
    _, p = build(dual_spark_raw())
    script = owner_watch_script(p.head, "", "c1")
    assert "unknown" in script and f"{p.head.script_path} watch spark-1 2>/dev/null || echo" in script


def test_a_bash_lib_is_its_functions_without_the_header(tmp_path):
    for path in BASH_LIB_DIR.glob("*.sh"):
        body = bash_lib(path.stem)
        assert not body.startswith("#") and body in path.read_text()
        assert "shellcheck shell=bash" not in body


def test_the_weights_functions_run_in_bash():
    out = subprocess.run(
        ["bash", "-c", bash_lib("weights") + 'human 1500000; say "a b"; (die nope) 2>&1 || true'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == ["1.5MB", "a b", "weights: nope"]


def _python_sources() -> list[Path]:
    return sorted([*(PROJECT_DIR / "components").glob("*.py"), *(PROJECT_DIR / "spark_llm" / "plan").rglob("*.py")])


def test_no_component_reads_the_config_from_the_plan():
    readers = [p.name for p in (PROJECT_DIR / "components").glob("*.py") if "plan.config" in p.read_text()]
    assert readers == []


def test_no_bash_function_is_defined_in_a_python_string():
    definition = re.compile(r"^\s*[\"']?([a-z_][a-z0-9_]*)\(\) \{", re.MULTILINE)
    found = {p.name: definition.findall(p.read_text()) for p in _python_sources()}
    assert {name: functions for name, functions in found.items() if functions} == {}


def test_each_bash_lib_function_is_defined_once():
    definition = re.compile(r"^([a-z_][a-z0-9_]*)\(\) \{", re.MULTILINE)
    names = [n for path in BASH_LIB_DIR.glob("*.sh") for n in definition.findall(path.read_text())]
    assert names and len(names) == len(set(names))


@pytest.mark.parametrize(("mode", "source"), [("present", "head"), ("pull", "head"), ("transfer", "operator")])
def test_the_image_steps_are_the_renderers_output_for_the_config(mode, source):
    raw = dual_spark_raw()
    raw["image"] = dict(raw["image"], mode=mode, source=source)
    cfg, p = build(raw)
    steps = build_steps(p).image
    assert steps.ref == cfg.image.ref
    assert steps.pull_platform == (cfg.image.platform if mode == "pull" else None)
    assert [s.script for s in steps.steps] == [s.script for s in image.image_steps(p)]
    for step, node in zip(steps.steps, p.nodes, strict=True):
        assert step.node == node.name
        assert step.verify("tok", "sha256:x") == image.verify_script(cfg, node, "sha256:x", "tok")


def test_the_image_functions_run_in_bash():
    out = subprocess.run(
        ["bash", "-c", bash_lib("image") + bash_lib("image_transfer") + "human_size 1500000; (fail nope) 2>&1 || true"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == ["1.5 MB", "nope"]
