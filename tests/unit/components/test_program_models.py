"""spark-llm:models under Pulumi mocks (the whole program, __main__.py): what a user of this version gets.

A list of one deploys exactly as the single form with the same keys (same resources, same inputs: an existing
stack moved to the list restarts nothing); a list of several is one engine group per model, each with its own
containers, files, supervisor and firewall table on the nodes, or, when they do not fit together on a node, refused
before any resource with their fit per node.
"""

from __future__ import annotations

import json
import re

import pulumi
import pytest

from components import bootstrap as stack
from spark_llm.config import raw_from_pulumi
from spark_llm.config.engine import Engine
from spark_llm.group.memory import INFO_SECTION
from spark_llm.plan.deployment import LAUNCH_TEMPLATE
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.stack import build_stack
from tests.unit.graph_mocks import dual_spark_stack_file, inputs, pinned
from tests.unit.graph_mocks import register as _register


def as_list(raw: dict, *more: dict) -> dict:
    """The single form's model, image and engine as the one entry of spark-llm:models (then `more` entries), with
    what Pulumi.yaml's defaults fill in for the keys left unset, as the real CLI hands them to the program."""
    entry = {**raw["model"], "image": raw["image"], "engine": raw["engine"]}
    out = {k: v for k, v in raw.items() if k not in ("model", "image", "engine")}
    return {**out, "models": [entry, *more], "model": {}, "image": {}, "engine": Engine().model_dump(by_alias=True)}


def graph(registered: dict) -> dict:
    """Every resource as the engine is told of it: type, parent, inputs, dependencies, options."""
    return {
        name: (
            r.type,
            r.parent,
            # Each run has a HOME of its own (graph_mocks.register): the key's path differs by that alone.
            re.sub(r"spark-llm-graph-[A-Za-z0-9_]+", "spark-llm-graph-HOME", json.dumps(inputs(r), sort_keys=True)),
            sorted(r.dependencies),
            r.deleteBeforeReplace,
            sorted(r.replaceOnChanges),
            sorted(r.aliasURNs),
        )
        for name, r in registered.items()
        if r.type != "pulumi:pulumi:Stack"  # the mocks register the stack itself in a process's first run only
    }


def test_a_list_of_one_deploys_exactly_as_the_single_form(monkeypatch):
    single = pinned(dual_spark_stack_file())
    as_single = graph(_register(monkeypatch, single))
    as_one = graph(_register(monkeypatch, as_list(pinned(dual_spark_stack_file()))))
    assert "spark-engine-spark-1" in as_single and len(as_single) > 30
    assert sorted(as_one) == sorted(as_single)
    assert [name for name in as_single if as_one[name] != as_single[name]] == []


def with_embed(utilization: str, flag: str = "--gpu-memory-utilization", big: str = "0.6") -> dict:
    """The dual-spark stack's model at 0.6 of each node, and a small `embed` beside it on the head."""
    raw = pinned(dual_spark_stack_file())
    raw["engine"] = {**raw["engine"], "flags": [flag, big]}
    embed = {
        "name": "embed",
        "path": "/home/aurora/models/embed",
        "image": raw["image"],
        "engine": {**raw["engine"], "executor": "native", "port": 30001, "distPort": 20001,
                   "flags": [flag, utilization]},
        "nodes": ["spark-1"],
    }  # fmt: skip
    return as_list(raw, embed)


def test_two_models_are_two_engine_groups_each_with_its_own_names_on_the_nodes(monkeypatch):
    registered = _register(monkeypatch, with_embed("0.2"))
    containers = {
        name: inputs(r)["name"] for name, r in registered.items() if r.type == "docker:index/container:Container"
    }
    # The first model keeps the single form's names: a stack that grows a second model restarts nothing serving.
    assert containers == {
        "spark-engine-spark-1": "spark-llm-engine",
        "spark-engine-spark-2": "spark-llm-engine",
        "spark-embed-engine-spark-1": "spark-llm-engine-embed",
        # One supervisor for the stack, watching both groups (the first model's name, where it always was).
        "spark-supervisor": "spark-llm-supervisor",
    }
    # Each group's files in a directory of its own: one model's relaunch never rewrites the other's script.
    scripts = json.dumps([inputs(r) for name, r in registered.items() if name.startswith("spark-embed-scripts")])
    assert "/home/aurora/spark-llm/models/embed/launch.sh" in scripts
    assert "/home/aurora/spark-llm/launch.sh" not in scripts
    # Each group stops the stack's supervisor before it restarts; the new one (after every group served) reads
    # both groups' specs, each mounted at its own path, with the program once.
    stop = inputs(registered["spark-embed-engine-stop-supervisor"])
    assert "docker stop -t 10 spark-llm-supervisor " in json.dumps(stop)
    watcher = inputs(registered["spark-supervisor"])
    assert watcher["entrypoints"] == [
        "python3",
        "/spark-llm-supervisor/supervisor.py",
        "/spark-llm-supervisor/spec.json",
        "/spark-llm-supervisor-embed/spec.json",
    ]
    mounted = {v["containerPath"]: v["hostPath"] for v in watcher["volumes"]}
    assert mounted["/spark-llm-supervisor-embed"] == "/home/aurora/spark-llm/models/embed/supervisor"
    assert mounted["/spark-llm-supervisor-state-embed"] == "/home/aurora/spark-llm/models/embed/supervisor-state"
    assert mounted["/spark-llm-supervisor"] == "/home/aurora/spark-llm/supervisor"


def test_several_models_that_do_not_fit_are_refused_before_any_resource_with_their_fit_per_node(monkeypatch):
    errors: list[str] = []
    monkeypatch.setattr(pulumi.log, "error", lambda msg, *a, **k: errors.append(msg))
    with pytest.raises(stack.Refusal) as err:
        _register(monkeypatch, with_embed("0.4"))
    assert err.value.code == 32  # shown as the run's one error: no traceback, no "unhandled error"
    lines = str(err.value).splitlines()
    assert errors == [str(err.value)]
    assert lines[:2] == ["invalid stack configuration:", "  spark-llm:models on the nodes (a GB10's MemTotal):"]
    assert (
        "    spark-1: Qwen/Qwen3.5-122B-A10B-FP8 73.0 GiB + embed 48.7 GiB = 121.7 GiB of 121.7 GiB MemTotal (4.0 GiB"
        " kept free): does not fit: lower embed's --gpu-memory-utilization to 0.36" in str(err.value)
    ), str(err.value)
    assert lines[-1].startswith("Nothing was run on any node.")


def test_a_stack_that_grows_a_second_model_keeps_every_resource_of_the_first_as_it_was(monkeypatch):
    single = pinned(dual_spark_stack_file())
    before = graph(_register(monkeypatch, single))
    small = {
        "name": "embed",
        "path": "/home/aurora/models/embed",
        "image": single["image"],
        "engine": {**single["engine"], "executor": "native", "port": 30001, "distPort": 20001,
                   "flags": ["--gpu-memory-utilization", "0.05"]},
        "nodes": ["spark-1"],
    }  # fmt: skip
    after = graph(_register(monkeypatch, as_list(pinned(dual_spark_stack_file()), small)))
    # Only the stack's supervisor changes (it now watches the second group too: its spec, mounted, on its command
    # line): a container beside the engines, made anew after both groups served, its `-clear` step run before it.
    assert [name for name in before if after.get(name) != before[name]] == [
        "spark-supervisor",
        "spark-supervisor-clear",
    ]
    added = set(after) - set(before)
    assert "spark-embed-engine-spark-1" in added and all(name.startswith("spark-embed") for name in added), added


def test_the_fit_is_judged_with_the_memory_each_node_reports(monkeypatch):
    """A node with less memory than a GB10 (here 64 GiB, as `/proc/meminfo` says it) refuses a pair that a GB10
    would hold: the budgets in bytes (--kv-cache-memory-bytes) do not shrink with it."""
    infos: list[str] = []
    monkeypatch.setattr(pulumi.log, "info", lambda msg, *a, **k: infos.append(msg))
    raw = with_embed("20G", "--kv-cache-memory-bytes", "40G")
    cfg = stack.parse(raw_from_pulumi({f"spark-llm:{k}": json.dumps(v) for k, v in raw.items()}))
    plans = build_stack(cfg, LAUNCH_TEMPLATE.read_text()).groups
    kib = 64 * 1024**2

    def seen(total_kib: int) -> dict[str, NodeObservation]:
        facts = {INFO_SECTION: f"MemTotal={total_kib} MemFree={total_kib} MemAvailable={total_kib}"}
        return {n: NodeObservation(n, facts=facts) for n in ("spark-1", "spark-2")}

    stack.place_models(cfg, [(p, seen(128 * 1024**2)) for p in plans])
    assert "(each node's MemTotal)" in infos[-1] and "spark-1:" in infos[-1] and ": fits" in infos[-1], infos
    with pytest.raises(stack.Refusal) as err:
        stack.place_models(cfg, [(p, seen(kib)) for p in plans])
    assert "of 64.0 GiB MemTotal (4.0 GiB kept free): does not fit" in str(err.value), str(err.value)
    assert str(err.value).splitlines()[-1].startswith("Nothing was run on any node.")


def test_several_models_without_a_router_are_each_at_their_own_port_and_preview_says_so(monkeypatch):
    warnings: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warnings.append(msg))
    _register(monkeypatch, with_embed("0.2"))
    said = [w for w in warnings if w.startswith("spark-llm:router is not set")]
    assert said == [
        "spark-llm:router is not set: each model answers at its own engine port on the head"
        " (Qwen/Qwen3.5-122B-A10B-FP8 at 30000, embed at 30001), with no one endpoint in front. Set spark-llm:router"
        ' (an image pinned by digest, docs/engines.md "The router") and spark-llm:apiKey: one endpoint and one key'
        " for every model, the engines then out of reach beyond the fabric."
    ]


def test_a_replace_of_one_models_container_restarts_that_group_and_not_the_others(monkeypatch, raw_config):
    """`spark-llm restart --model embed`'s `pulumi up --replace` names the embed group's head container: the program
    restarts that group in order (a new generation) and leaves the big model's group, on the same head, as it is."""
    from spark_llm.remote.pulumi_process import PulumiProcess
    from tests.unit.ops.several_models import BIG, SMALL, two_models

    plans = two_models(raw_config).models
    urn = (
        "urn:pulumi:sim::spark-llm::spark-llm:components:SparkCluster$spark-llm:components:EngineGroup"
        "$docker:index/container:Container::spark-embed-engine-spark-1"
    )
    monkeypatch.setattr(stack, "under_mocks", lambda: False)
    monkeypatch.setattr(stack, "pulumi_process", lambda: PulumiProcess(1, ["pulumi", "up", "--replace", urn], "/p"))
    assert stack.group_request(plans[SMALL]).replaced == ("spark-1",)
    assert stack.group_request(plans[BIG]).replaced == ()


def test_a_rollback_of_one_model_puts_back_that_models_weights_and_no_others(monkeypatch):
    """`spark-llm rollback --model embed` whose weights were replaced: the rollback's `up` (SPARK_LLM_RESTORE_WEIGHTS
    with SPARK_LLM_RESTORE_MODEL) puts the kept version back in the embed group's steps alone; the big model's steps
    stay as they are (they would look for weights they never had)."""
    before = graph(_register(monkeypatch, with_embed("0.2")))
    monkeypatch.setenv("SPARK_LLM_RESTORE_WEIGHTS", "a" * 64)
    monkeypatch.setenv("SPARK_LLM_RESTORE_MODEL", "embed")
    after = graph(_register(monkeypatch, with_embed("0.2")))
    changed = [name for name in before if after.get(name) != before[name]]
    assert changed and all(name.startswith("spark-embed") for name in changed), changed
    monkeypatch.delenv("SPARK_LLM_RESTORE_MODEL")  # the stack's one model's rollback: every group it plans
    every = graph(_register(monkeypatch, with_embed("0.2")))
    assert any(not name.startswith("spark-embed") and every[name] != before[name] for name in before)


def test_two_models_share_one_provider_a_node_and_the_groups_are_aliased_from_where_they_stood(monkeypatch):
    """The stack's room (components.stack): one pulumi-command provider, one docker provider a node, for every group
    (each model made its own before); the groups and the router stand under the stack, each aliased from the stack's
    root where an earlier version put them, and the shared providers from under the first group, whose names they
    keep: a stack deployed before upgrades moving nothing (tests/integration/test_router.py's upgrade)."""
    raw = with_embed("0.2")
    raw["router"] = {"image": "ghcr.io/you/router@sha256:" + "ab" * 32, "port": 4000}
    raw["apiKey"] = "sk-test"
    registered = _register(monkeypatch, raw, secrets=("apiKey",))
    providers = sorted(name for name, r in registered.items() if r.type.startswith("pulumi:providers:"))
    assert providers == ["spark-command", "spark-docker-spark-1", "spark-docker-spark-2"]
    assert registered["stack"].type == "spark-llm:components:SparkStack"
    for name in ("spark", "spark-embed", *providers):
        assert registered[name].parent.endswith("spark-llm:components:SparkStack::stack"), name
    for name in ("spark", "spark-embed"):
        assert [str(a.spec) for a in registered[name].aliases] == ["noParent: true\n"], name
    # (The router's container has its component's name: its parent is the router, under the stack.)
    assert registered["router"].parent.endswith("spark-llm:components:SparkStack$spark-llm:components:Router::router")
    first_group = "urn:pulumi:dual-spark::spark-llm::spark-llm:components:SparkCluster::spark"
    for name in providers:
        assert [a.spec.parentUrn for a in registered[name].aliases] == [first_group], name
    # Every group's steps and containers reach the nodes through the shared providers.
    used = {r.provider.split("::")[-2] for r in registered.values() if r.provider}
    assert used == set(providers), used
