"""`spark-llm status` and the host as it last worked: each node's host read with its status, what changed since the
last start that served named as a warning, and `--hosts` showing the record; docs/real-sparks.md shows the
dual-spark stack's as this code renders it (from a plausible record: nothing here contacts the Sparks)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from spark_llm.ops.status import command as status
from spark_llm.ops.status import read as status_read
from spark_llm.plan.host_record import fingerprint_lines
from spark_llm.plan.observation import GROUP_MARK
from spark_llm.plan.stack import StackPlan
from tests.unit.ops.node_facts import node_run, running, with_revision
from tests.unit.ops.status.conftest import reading
from tests.unit.plan.test_host_record import IF, spark

REAL_SPARKS = Path(__file__).resolve().parents[4] / "docs" / "real-sparks.md"
AT = "2026-12-04T21:10:03+00:00"


RECORD = {
    "revision": "0123456789abcdef",
    "at": AT,
    "nodes": {},
    "hosts": {"spark-1": spark("c0a8:c80c"), "spark-2": spark("c0a8:c80d")},
}


def host_section(fields: dict[str, str]) -> tuple[int, str]:
    return 0, "".join(f"host.{k}\t{v}\n" for k, v in fields.items() if k != "nccl")


def kernel_update_runs() -> dict:
    """What each node's status script printed: the worker's kernel updated since the last start that served."""
    worker_now = {**spark("c0a8:c80d"), "kernel": "7.0.0-1019-nvidia"}
    return {
        "spark-1": node_run("spark-1", running("2026-12-04T21:08:00Z"), host=host_section(spark("c0a8:c80c"))),
        "spark-2": node_run("spark-2", running("2026-12-04T21:07:40Z"), host=host_section(worker_now)),
    }


@pytest.fixture
def after_a_kernel_update(spark_plan, monkeypatch):
    plan = with_revision(spark_plan)
    runs = list(kernel_update_runs().values())
    nodes = [status_read.node_status(n, "spark-llm-engine", r) for n, r in zip(plan.nodes, runs, strict=True)]
    monkeypatch.setattr(status, "collect_stack", reading(nodes, status.Health(200, (plan.model_name,))))
    monkeypatch.setattr(status, "stack_outputs", lambda _pulumi: {"start_timeline": RECORD})
    # No canary recorded, none asked: this test is about the hosts.
    monkeypatch.setattr(status, "ask_canaries", lambda head, asks: [None for _ in asks])
    return plan


def test_each_nodes_host_is_read_with_its_status(after_a_kernel_update, monkeypatch):
    # Through the real reading: each node's one script (its group's part behind the mark), split and parsed.
    runs = kernel_update_runs()

    def run_on(target, script, *, timeout=None):
        printed = runs[target.name]
        return replace(printed, stdout=f"\n{GROUP_MARK}\t0\n" + printed.stdout)

    monkeypatch.setattr(status_read, "run_on", run_on)
    stack = StackPlan.one(after_a_kernel_update)
    nodes = status_read.collect_stack(stack, 5)[0][after_a_kernel_update.model_name].statuses
    assert nodes[1].host["kernel"] == "7.0.0-1019-nvidia" and nodes[1].host[f"mtu.{IF}"] == "9000"
    assert nodes[0].host["kernel"] == "6.17.0-1032-nvidia"


def test_status_names_what_changed_since_the_last_start_that_served(after_a_kernel_update, capsys):
    status.run(None, after_a_kernel_update, argparse.Namespace(json=True, timeout=5, hosts=False))
    changed = json.loads(capsys.readouterr().out)["host_changes"]
    assert changed == ["spark-2: kernel 6.17.0-1032-nvidia -> 7.0.0-1019-nvidia"]
    status.run(None, after_a_kernel_update, argparse.Namespace(json=False, timeout=5, hosts=True))
    out = capsys.readouterr().out
    assert f"warning: the hosts changed since the last start that served ({AT}): spark-2: kernel" in out
    assert "\n".join(fingerprint_lines(RECORD)) in out


def test_the_real_sparks_page_shows_the_dual_spark_fingerprint_as_status_renders_it():
    assert "\n".join(fingerprint_lines(RECORD)) in REAL_SPARKS.read_text()
