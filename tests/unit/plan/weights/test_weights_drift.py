"""Drift: the probe's weights sections (the live digests), the live value of each node, and the token the head
copy records, which the next probe reads as unchanged."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from spark_llm.plan.drift import step_token
from spark_llm.plan.observation import NodeObservation, parse_probe
from spark_llm.plan.weights import steps as weights
from tests.unit.plan.weights_runs import TOKEN, TOOL, build, head_copy, model_dir, run_bash, tool


def test_probe_prints_the_live_digest_of_model_path_and_of_the_heads_source(tmp_path, env):
    src = model_dir(tmp_path / "src", {"a.bin": b"a"})
    cfg, p = build({"kind": "head", "path": str(src)}, path=str(tmp_path / "dst"))
    head_out = run_bash(weights.render_probe(cfg, p.head, TOOL), env).stdout
    facts = parse_probe("spark-1", head_out).facts
    empty = tool("scan", str(tmp_path / "dst"), env=env).stdout.split()[1]  # not there yet: the empty manifest
    source = tool("scan", str(src), env=env).stdout.split()[1]
    # Each digest with its manifest's bytes beside it: none at model.path yet, the source's one byte.
    assert facts == {"weights": empty, "weights-bytes": "0", "weights-source": source, "weights-source-bytes": "1"}
    assert weights.live_value(cfg, p.head, facts) == f"{facts['weights']}/{facts['weights-source']}"
    # The memory admission counts the source's size before the weights are at model.path.
    assert weights.weights_size(facts) == 1
    worker_facts = parse_probe("spark-2", run_bash(weights.render_probe(cfg, p.workers[0], TOOL), env).stdout).facts
    assert list(worker_facts) == ["weights", "weights-bytes"]  # a worker has no source dir
    assert weights.live_value(cfg, p.workers[0], worker_facts) == empty


@pytest.mark.parametrize(
    ("facts", "expected"),
    [({}, None), ({"weights": "d1"}, "d1"), ({"weights": "d1", "weights-source": "s1"}, "d1")],
)
def test_live_value_of_a_worker(facts, expected):
    cfg, p = build()
    assert weights.live_value(cfg, p.workers[0], facts) == expected


def test_head_copy_records_its_token_with_what_the_probe_then_reads(tmp_path, env):
    """A no-op next time: the recorded value is the live value the probe computes (spark_llm.plan.drift)."""
    model_dir(tmp_path / "src", {"a.bin": b"a"})
    src, dst = tmp_path / "src", tmp_path / "dst"
    cfg, p = build({"kind": "head", "path": str(src)}, path=str(dst))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    run_bash(weights.render_obtain(cfg, head, TOOL, TOKEN), env)
    recorded = (tmp_path / "remote" / "state" / "weights").read_text().strip()
    facts = parse_probe("spark-1", run_bash(weights.render_probe(cfg, head, TOOL), env).stdout).facts
    observation = NodeObservation(node="spark-1", tokens={"weights": recorded}, facts=facts)
    assert step_token(observation, "weights", weights.live_value(cfg, head, facts)) == (TOKEN, None)
    (src / "a.bin").write_bytes(b"changed")  # the source dir drifted: the head copy is repaired
    facts = parse_probe("spark-1", run_bash(weights.render_probe(cfg, head, TOOL), env).stdout).facts
    token, why = step_token(observation, "weights", weights.live_value(cfg, head, facts))
    assert token.startswith("repair-") and why and "weights on spark-1: now" in why


def test_head_copy_update_reprints_the_digest_from_the_stored_manifest(tmp_path, env):
    model_dir(tmp_path / "src", {"a.bin": b"a"})
    script = head_copy(tmp_path)
    digest = weights.parse_digest(run_bash(script, env).stdout)
    cfg, _ = build({"kind": "head", "path": str(tmp_path / "src")}, path=str(tmp_path / "dst"))
    out = subprocess.run(["bash", "-c", weights.head_digest_command(cfg)], capture_output=True, text=True, check=True)
    assert weights.parse_digest(out.stdout) == digest and "connection settings recorded" in out.stdout
