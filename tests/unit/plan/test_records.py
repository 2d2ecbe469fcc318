"""The records that cross to another process or node have one writer that fills every typed key, and read back as
written: the readiness gate's spec (stdin) and the supervisor's spec (a file on the head)."""

from __future__ import annotations

import json
from typing import get_type_hints

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.group.records import RouterSpec, SpecMember, SupervisorFabric, SupervisorSpec
from spark_llm.plan import deployment, readiness, router, supervisor
from spark_llm.plan.readiness import FabricSpec, GateMember, ReadinessSpec, Rollout


def plan_of(raw_config, restore_weights: str | None = None):
    raw_config["supervisor"] = {"enabled": True}
    template = deployment.LAUNCH_TEMPLATE.read_text()
    return deployment.build_plan(groups(parse(raw_config))[0], template, restore_weights)


def test_the_gates_spec_has_every_typed_key_and_reads_back_as_written(raw_config):
    # With roceDevices: the fabric proof's part is there only then (spark_llm.plan.fabric_proof).
    raw_config.setdefault("network", {})["roceDevices"] = ["rocep1s0f1", "roceP2p1s0f1"]
    # A start on probation (spark-llm:rollout.probationSeconds): the gate watches it that long past the first answer.
    raw_config.setdefault("rollout", {})["probationSeconds"] = 90
    # A rollback's start (it pins a kept version): the versions every node kept stay kept when it serves.
    spec = readiness.readiness_spec(plan_of(raw_config, restore_weights="e" * 64), "dual-spark")
    assert set(spec) == set(get_type_hints(ReadinessSpec)) and spec["keep_versions"] is True
    assert spec["probation_seconds"] == 90
    # Any other start has no such keys: the gate's stdin of a deployed stack stays as it was.
    del raw_config["rollout"]["probationSeconds"]
    assert not {"keep_versions", "probation_seconds"} & set(readiness.readiness_spec(plan_of(raw_config), "dual-spark"))
    assert set(spec["fabric"]) == set(get_type_hints(FabricSpec))
    assert set(spec["members"][0]) == set(get_type_hints(GateMember))
    assert set(spec["rollout"]) == set(get_type_hints(Rollout)) and spec["rollout"]["stack"] == "dual-spark"
    text = readiness.spec_text(spec)
    assert readiness.parse_spec(text) == spec and json.loads(text) == spec


def test_the_supervisors_spec_has_every_typed_key(raw_config):
    # With spark-llm:router: the router's part is there only then (spark_llm.plan.router); the fabric's only with
    # roceDevices (each restart's fabric proof, as the gate's); its metrics' directory only with monitoring.
    raw_config["apiKey"] = "sk-test"
    raw_config["router"] = {"image": "sha256:" + "c" * 64}
    raw_config["monitoring"] = {"image": "sha256:" + "d" * 64, "nodeExporterImage": "sha256:" + "d" * 64}
    raw_config["monitoringPassword"] = "pw"
    raw_config.setdefault("network", {})["roceDevices"] = ["rocep1s0f1", "roceP2p1s0f1"]
    plan = plan_of(raw_config)
    routed = router.router_plan(plan.config, [router.engine_worker(plan)])
    spec = supervisor.spec(plan, {"spark-1": "a" * 64, "spark-2": "b" * 64}, routed)
    assert set(spec) == set(get_type_hints(SupervisorSpec))
    assert "router" in spec and set(spec["router"]) == set(get_type_hints(RouterSpec))
    assert set(spec["fabric"]) == set(get_type_hints(SupervisorFabric))
    assert spec["history_path"] == "/spark-llm-supervisor-history/starts.jsonl"
    assert spec["textfile"] == "/run/spark-llm/textfile"
    assert all(set(m) == set(get_type_hints(SpecMember)) for m in spec["members"])
