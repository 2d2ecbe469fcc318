"""spark-llm:nodes[].smClockCapMhz: a node's GPU SM clock cap as declared state. The cap outside the GPU's range is
refused naming the key; the step's script locks and records, its delete resets (run here against the sim's
nvidia-smi); what the probe reads back is in sync, a first deployment, or drift (a reboot, a lock lifted by hand),
and `spark-llm status` says the drift in preview's words."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from spark_llm.config import ConfigError
from spark_llm.ops.status import read as status_read
from spark_llm.ops.status.gpu_clock import clock_drift
from spark_llm.plan import gpu_clock
from spark_llm.plan.drift import first_run, step_token
from spark_llm.plan.observation import NodeObservation, parse_probe
from spark_llm.plan.scripts import bash_lib
from tests.unit.ops.node_facts import build

SIM = Path(__file__).resolve().parents[3] / "sim"

RANGE = "600 2405"


def capped(raw_config, cap=2000, index=1):
    raw_config["nodes"][index]["smClockCapMhz"] = cap
    return build(raw_config)


def test_the_cap_is_a_positive_number_of_mhz_named_by_its_key(raw_config):
    for bad in (0, True, "fast"):
        raw_config["nodes"][1]["smClockCapMhz"] = bad
        with pytest.raises(ConfigError, match=r"spark-llm:nodes\[1\]\.smClockCapMhz"):
            build(raw_config)
    plan = capped(raw_config)
    assert gpu_clock.caps(plan.config.stack.nodes) == {plan.workers[0].name: 2000}


def test_a_cap_outside_the_gpus_range_is_refused_naming_the_key_with_a_value_in_range(raw_config):
    nodes = capped(raw_config, cap=3000).config.stack.nodes
    seen = {n.name: NodeObservation(n.name, facts={gpu_clock.RANGE_SECTION: RANGE}) for n in nodes}
    [refusal] = gpu_clock.refusals(nodes, seen)
    assert refusal.startswith(f"spark-llm:nodes[1].smClockCapMhz 3000 is outside the GPU's range on {nodes[1].name}")
    assert "(600-2405 MHz" in refusal and "pulumi config set --path 'nodes[1].smClockCapMhz' 2000" in refusal
    # Below the lowest clock the GPU lists: the example is still one it takes.
    low = gpu_clock.range_refusal(0, "spark-1", 100, {gpu_clock.RANGE_SECTION: "900 1800"})
    assert low is not None and "'nodes[0].smClockCapMhz' 1800" in low
    # In range, or a range nvidia-smi did not give (the step says what nvidia-smi says): nothing refused.
    assert gpu_clock.range_refusal(0, "spark-1", 2000, {gpu_clock.RANGE_SECTION: RANGE}) is None
    assert gpu_clock.range_refusal(0, "spark-1", 2000, {gpu_clock.RANGE_SECTION: "0 unknown"}) is None


def node(record: str = "", applied: str = "", now: str = "2000") -> NodeObservation:
    facts = {gpu_clock.NOW_SECTION: now, gpu_clock.RANGE_SECTION: RANGE}
    if record:
        facts[gpu_clock.RECORD_SECTION] = record
    if applied:
        facts[gpu_clock.APPLIED_SECTION] = applied
    return NodeObservation("spark-2", facts=facts, run="run-1")


def token(observation: NodeObservation) -> tuple[str, str | None]:
    return step_token(gpu_clock.recorded(observation), gpu_clock.STEP, gpu_clock.live(observation))


def test_the_read_back_is_in_sync_first_run_or_drift():
    # Applied and in force, the clock under the cap: the recorded token, nothing to do.
    assert token(node("tok 2000", "tok 2000")) == ("tok", None)
    assert token(node("tok 2000", "tok 2000", now="510")) == ("tok", None)
    # Never applied: a first deployment (no warning), a token that makes the step run.
    fresh = node()
    assert first_run(gpu_clock.recorded(fresh), gpu_clock.STEP) and token(fresh)[0].startswith("repair-")
    # Rebooted: what `up` applied is kept, the lock (and /run) is not.
    _, why = token(node("", "tok 2000", now="2405"))
    assert why == "gpu-clock-cap on spark-2: gone (was 2000)"
    # Lifted by hand: the clock above the cap.
    _, why = token(node("tok 2000", "tok 2000", now="2405"))
    assert why == "gpu-clock-cap on spark-2: now lifted: the SM clock at 2405 MHz, was 2000"


def test_status_reads_the_cap_on_capped_nodes_only_and_says_preview_s_drift(raw_config):
    spark_plan = build(raw_config)
    plan = capped(raw_config)
    worker, head = plan.workers[0], plan.head
    assert "gc_read" in status_read.node_script(plan, worker)
    assert "gc_read" not in status_read.node_script(plan, head)
    assert "gc_read" not in status_read.node_script(spark_plan, spark_plan.workers[0])
    seen = {worker.name: node("tok 2000", "tok 2000"), head.name: NodeObservation(head.name)}
    assert clock_drift(plan, seen) == []
    assert clock_drift(plan, {worker.name: node()}) == []  # never applied: `up` applies it, no drift
    [drift] = clock_drift(plan, {worker.name: node("", "tok 2000")})
    assert drift == gpu_clock.drift_warning(worker.name, "gpu-clock-cap on spark-2: gone (was 2000)")
    assert "`pulumi up` applies it again" in drift


@pytest.mark.skipif(os.geteuid() != 0, reason="the sim's nvidia-smi changes clocks as root, as the real one does")
def test_the_step_locks_records_and_its_delete_resets_against_the_sims_nvidia_smi(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(SIM))
    import memory as sim_memory  # sim/'s flat modules, as sim/sim imports them

    tools = tmp_path / "bin"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text(sim_memory._FAKE_SMI.replace("/run/spark-llm-sim/gpu-clock-lock", str(tmp_path / "lock")))
    smi.chmod(0o755)
    applied = tmp_path / "home" / gpu_clock.STEP
    here = f"GC_RECORD={tmp_path}/run/gpu-clock-cap\n"

    def run(script: str, phase: str = "create") -> str:
        env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "SPARK_LLM_PHASE": phase}
        lib, _, rest = script.partition(bash_lib("gpu_clock"))
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", lib + bash_lib("gpu_clock") + here + rest],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def read() -> NodeObservation:
        return parse_probe(
            "spark-2", run(gpu_clock.probe("root").replace("/root/spark-llm/gpu-clock-cap", str(applied)))
        )

    step = gpu_clock.step_script(2000, "tok-1", "root").replace("/root/spark-llm/gpu-clock-cap", str(applied))
    assert "capped at 2000 MHz" in run(step)
    seen = read()
    assert seen.facts[gpu_clock.NOW_SECTION] == "2000" and seen.facts[gpu_clock.RANGE_SECTION] == RANGE
    assert token(seen) == ("tok-1", None)
    # Lifted by hand: the clock back at its top is drift.
    subprocess.run([str(smi), "-rgc"], check=True, capture_output=True)
    assert "lifted" in (token(read())[1] or "")
    # The delete: the lock reset, both records gone; a read now is a node never capped.
    run(step)
    assert "removed" in run(step, phase="delete")
    seen = read()
    assert gpu_clock.APPLIED_SECTION not in seen.facts and gpu_clock.RECORD_SECTION not in seen.facts
    assert seen.facts[gpu_clock.NOW_SECTION] == "2405"


def test_the_delete_on_a_node_without_nvidia_smi_removes_the_records_and_does_not_stop_a_destroy(tmp_path):
    """The driver gone with its lock (nvidia-smi removed): nothing to reset, the records go, the step succeeds."""
    applied = tmp_path / "home" / gpu_clock.STEP
    applied.parent.mkdir()
    applied.write_text("tok 2000\n")
    step = gpu_clock.step_script(2000, "tok", "root").replace("/root/spark-llm/gpu-clock-cap", str(applied))
    lib = bash_lib("gpu_clock")
    script = step.replace(lib, lib + f"GC_RECORD={tmp_path}/run/gpu-clock-cap\n")
    env = {"PATH": "/usr/bin:/bin", "SPARK_LLM_PHASE": "delete"}
    if os.path.exists("/usr/bin/nvidia-smi") or os.path.exists("/bin/nvidia-smi"):
        pytest.skip("this machine has an nvidia-smi on its PATH")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "no GPU clock lock to reset" in done.stdout and not applied.exists()
