"""The operator CLI on a stack of several models (spark-llm:models): `--model` picks one model's group for the
commands that act on one (refused without it, or naming no model of the stack: one line, exit 2, nothing run);
status shows every model, a row and a block each, `--json` keyed by model; preflight and exec are about the nodes;
restart replaces only the named model's containers; rollback puts back only that model's entry."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from spark_llm.ops import cli, restart, rollback
from spark_llm.ops.preflight import command as preflight
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.ops.status import command as status
from spark_llm.ops.status import several
from spark_llm.ops.status.canary import CanaryCheck
from spark_llm.ops.status.read import Health, NodeStatus
from spark_llm.ops.status.report import ModelReport
from spark_llm.plan.rollback import RollbackRefusedError, model_names, one_model_stack_file
from spark_llm.plan.stack import StackPlan
from tests.unit.ops.node_facts import build
from tests.unit.ops.several_models import BIG, SMALL, two_models

NAMES = f"{BIG}, {SMALL}"


@pytest.fixture
def given(monkeypatch):
    """cli.main over a stack whose config plans as `stack`; what each command's run was given, by command."""
    got: dict[str, object] = {}

    def use(stack: StackPlan) -> dict[str, object]:
        monkeypatch.setattr(PulumiCli, "load_stack", lambda self: stack)
        monkeypatch.setattr(cli.key_files, "check_keys", lambda files: None)
        for name, (module, _) in cli.COMMANDS.items():
            monkeypatch.setattr(module, "run", lambda pulumi, plan, args, name=name: got.setdefault(name, plan) and 0)
        return got

    return use


@pytest.mark.parametrize("command", ["restart", "logs", "smoke"])
def test_a_command_on_one_group_refuses_to_guess_among_several_models(command, given, raw_config, capfd):
    got = given(two_models(raw_config))
    assert cli.main([command, "--stack", "s"]) == 2
    assert (
        capfd.readouterr().err == f"spark-llm {command}: the stack serves 2 models: name one with --model ({NAMES})\n"
    )
    assert cli.main([command, "--stack", "s", "--model", "nope"]) == 2
    err = capfd.readouterr().err
    assert err == f"spark-llm {command}: --model nope: the stack serves no model of that name; its models: {NAMES}\n"
    assert got == {}  # nothing ran


def test_model_picks_that_models_group(given, raw_config):
    stack = two_models(raw_config)
    got = given(stack)
    assert cli.main(["restart", "--stack", "s", "--model", SMALL]) == 0
    assert got["restart"] is stack.models[SMALL]
    assert [n.name for n in stack.models[SMALL].nodes] == ["spark-1"]
    assert stack.models[SMALL].nodes[0].remote_dir == "/home/aurora/spark-llm/models/embed"


def test_on_a_stack_of_one_model_model_may_name_it_and_nothing_else(given, raw_config, capfd):
    one = build(raw_config)
    got = given(StackPlan.one(one))
    assert cli.main(["logs", "--stack", "s", "--model", "other"]) == 2
    assert (
        capfd.readouterr().err
        == f"spark-llm logs: --model other: the stack serves one model, {BIG} (--model can be left out)\n"
    )
    assert got == {}
    assert cli.main(["logs", "--stack", "s", "--model", BIG]) == 0 and got["logs"] is one


def test_status_is_given_every_model_or_the_one_named_and_the_node_commands_every_node(given, raw_config):
    stack = two_models(raw_config)
    got = given(stack)
    assert cli.main(["status", "--stack", "s"]) == 0 and got.pop("status") == stack
    assert cli.main(["status", "--stack", "s", "--model", BIG]) == 0
    # The first model keeps the single form's names: the stack, not its plan, says that it is one of several.
    only = got.pop("status")
    assert only.models == {BIG: stack.models[BIG]} and only.several and stack.models[BIG].unit is None
    assert cli.main(["preflight", "--stack", "s"]) == 0
    assert cli.main(["exec", "--stack", "s", "spark-2", "--", "true"]) == 0
    for command in ("preflight", "exec"):
        assert [n.name for n in got[command].nodes] == ["spark-1", "spark-2"], command
    assert preflight.add_arguments is not None  # preflight takes no --model: it is about the nodes
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["exec", "--model", SMALL, "spark-1", "--", "true"])


CONTAINER = "docker:index/container:Container"
COMMAND = "command:remote:Command"


def test_restart_of_one_model_replaces_its_containers_only(raw_config):
    stack = two_models(raw_config)
    big = "spark-engine"  # the first model keeps the single form's names
    resources = [
        {"type": CONTAINER, "urn": f"urn:x::{big}-spark-1"},
        {"type": CONTAINER, "urn": f"urn:x::{big}-spark-2"},
        {"type": CONTAINER, "urn": "urn:x::spark-embed-engine-spark-1"},
        {"type": COMMAND, "urn": f"urn:x::{big}-stop-supervisor"},
        {"type": COMMAND, "urn": "urn:x::spark-embed-engine-stop-supervisor"},
    ]
    export = {"deployment": {"resources": resources}}
    # The big group: its worker (its head follows); the small group of the head alone: its head's container.
    assert restart.member_urns(export, stack.models[BIG]) == [f"urn:x::{big}-spark-2"]
    assert restart.member_urns(export, stack.models[SMALL]) == ["urn:x::spark-embed-engine-spark-1"]
    assert restart.supervisor_stop_urns(export, stack.models[SMALL]) == ["urn:x::spark-embed-engine-stop-supervisor"]
    assert restart.supervisor_stop_urns(export, stack.models[BIG]) == [f"urn:x::{big}-stop-supervisor"]


def report(plan, state: str = "in sync", revision: str | None = None) -> ModelReport:
    statuses = [
        NodeStatus(n.name, n.role, plan.container, "running", revision=revision or plan.group_revision)
        for n in plan.nodes
    ]
    timeline = {"at": "2026-12-05T09:00:00Z", "gate_seconds": 12.5, "nodes": {}}
    canary = CanaryCheck(True, "the same answer as at readiness")
    health = Health(200, (plan.model_name,), supervisor="running")
    return ModelReport(plan, state, "why", statuses, health, None, "running", timeline, [], "", canary, [])


def test_status_of_several_models_is_a_row_and_a_block_per_model(raw_config, capsys):
    raw_config["supervisor"] = {"enabled": True}
    stack = two_models(raw_config)
    reports = [report(stack.models[BIG]), report(stack.models[SMALL], "drift", revision="0" * 16)]
    several.emit(reports, argparse.Namespace(json=False))
    out = capsys.readouterr().out
    assert "status: 2 models" in out
    assert (
        f"status: {BIG} at http://10.1.230.180:30000" in out and f"status: {SMALL} at http://10.1.230.180:30001" in out
    )
    rows = {r[0]: r for r in (several.row(x) for x in reports)}
    assert rows[BIG][1] == "spark-1 running, spark-2 running" and rows[SMALL][1] == "spark-1 running"
    assert rows[SMALL][2] == f"{'0' * 16} (config: {stack.models[SMALL].group_revision})"
    assert rows[SMALL][3] == "drift"
    assert rows[BIG][5] == "2026-12-05T09:00:00Z, answered 12.5 s in"
    budget = stack.models[BIG].supervisor
    assert budget is not None  # each model's group has a supervisor of its own, with its own budget
    assert rows[BIG][6] == f"running, 0/{budget.max_restarts} restarts per {budget.window_seconds} s"


def test_status_json_of_several_models_is_keyed_by_model(raw_config, capsys):
    stack = two_models(raw_config)
    reports = [report(stack.models[BIG]), report(stack.models[SMALL], "drift")]
    several.emit(reports, argparse.Namespace(json=True))
    document = json.loads(capsys.readouterr().out)
    assert document["state"] == "attention" and sorted(document["models"]) == sorted([BIG, SMALL])
    small = document["models"][SMALL]
    assert small["state"] == "drift" and small["config_revision"] == stack.models[SMALL].group_revision
    assert [n["node"] for n in small["nodes"]] == ["spark-1"]
    assert small["endpoint"] == "http://10.1.230.180:30001"


def test_status_of_a_stack_of_one_model_prints_as_before(raw_config, monkeypatch, capsys):
    one = build(raw_config)
    monkeypatch.setattr(status, "stack_outputs", lambda pulumi: {})
    monkeypatch.setattr(status, "state_pending", lambda pulumi: [])
    monkeypatch.setattr(status, "collect_stack", lambda stack, timeout: ({n: None for n in stack.models}, None))
    monkeypatch.setattr(status, "model_report", lambda plan, outputs, seen: report(plan))
    monkeypatch.setattr(status, "with_canaries", lambda stack, reports, outputs, readings: reports)
    assert status.run(None, StackPlan.one(one), argparse.Namespace(json=True, hosts=False, timeout=5)) == 0
    document = json.loads(capsys.readouterr().out)
    assert "models" not in document and document["model"] == one.model_name and document["state"] == "in sync"


def entry(name: str, flags: list[str]) -> dict:
    return {"name": name, "path": f"/m/{name}", "image": {"ref": "x"}, "engine": {"flags": flags}}


def test_a_rollback_of_one_model_puts_back_its_entry_alone():
    good = {"config": {"spark-llm:models": [entry("a", ["--old"]), entry("b", ["--b-then"])], "spark-llm:x": 1}}
    current = {
        "encryptionsalt": "salt",
        "config": {"spark-llm:models": [entry("a", ["--new"]), entry("b", ["--b-now"])], "spark-llm:x": 2},
    }
    document = one_model_stack_file(good, current, "a")
    assert document["config"]["spark-llm:models"] == [entry("a", ["--old"]), entry("b", ["--b-now"])]
    assert document["config"]["spark-llm:x"] == 2 and document["encryptionsalt"] == "salt"
    assert model_names(current) == ["a", "b"] and model_names({"config": {"spark-llm:models": [entry("a", [])]}}) == []
    with pytest.raises(RollbackRefusedError, match="the last good update listed no model c"):
        one_model_stack_file(good, current, "c")


class HistoryCli:
    """PulumiCli as rollback reads the stack's history: one succeeded update of two models."""

    stack = "sim"
    config_file = None

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def capture(self, *args: str) -> str:
        models = [entry("a", ["--old"]), entry("b", [])]
        config = {"spark-llm:models": {"objectValue": models, "secret": False}}
        return json.dumps([{"kind": "update", "result": "succeeded", "startTime": "t", "config": config}])


def test_a_rollback_of_a_stack_of_several_models_needs_model(tmp_path, monkeypatch, capsys):
    (tmp_path / "Pulumi.yaml").write_text("name: spark-llm\n")
    current = {"config": {"spark-llm:models": [entry("a", ["--new"]), entry("b", [])]}}
    (tmp_path / "Pulumi.sim.yaml").write_text(yaml.safe_dump(current))
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(after_pid=None, model=None, json=False)
    assert rollback.run(HistoryCli(tmp_path), None, args) == 2
    assert capsys.readouterr().err == (
        "spark-llm rollback: the stack serves several models: name the one to roll back with --model (a, b);"
        " nothing was changed\n"
    )
    args.model = "c"
    assert rollback.run(HistoryCli(tmp_path), None, args) == 2
    assert "the last good update listed no model c in spark-llm:models (it listed a, b)" in capsys.readouterr().err


def test_a_rollback_of_one_model_that_must_put_back_its_weights_names_that_model_to_the_program(
    tmp_path, monkeypatch, capsys
):
    """Its weights replaced since the last good start: the rollback's `up` gets the kept version's digest and the
    model it is for (components.bootstrap.restore_weights puts it back in that group alone)."""
    from types import SimpleNamespace

    from spark_llm.ops import rollback_weights

    (tmp_path / "Pulumi.yaml").write_text("name: spark-llm\n")
    current = {"config": {"spark-llm:models": [entry("a", ["--new"]), entry("b", [])]}}
    (tmp_path / "Pulumi.sim.yaml").write_text(yaml.safe_dump(current))
    monkeypatch.chdir(tmp_path)
    for name in (rollback_weights.RESTORE_ENV, rollback_weights.RESTORE_MODEL_ENV, rollback.ROLLBACK_ENV):
        monkeypatch.setenv(name, "")  # recorded: what the rollback sets in this process is undone afterwards
        monkeypatch.delenv(name)
    asked: list[str | None] = []

    class Back(HistoryCli):
        def __init__(self, stack: str = "sim", config_file: str | None = None, cwd: Path | None = None) -> None:
            super().__init__(cwd or tmp_path)
            self.config_file = config_file

        def load_plan(self, model: str | None = None) -> SimpleNamespace:
            asked.append(model)
            return SimpleNamespace(group_revision="r" * 16)

    seen: dict[str, str] = {}
    kept = rollback_weights.RollbackWeights("d" * 64, True, "spark-1 runs other weights: the version is put back")
    monkeypatch.setattr(rollback, "PulumiCli", Back)
    monkeypatch.setattr(rollback, "weights_to_restore", lambda plan: kept)
    monkeypatch.setattr(rollback, "_up", lambda back, message, deadline: seen.update(rollback.os.environ) or 0)
    monkeypatch.setattr(rollback, "_first_completion", lambda plan, deadline: None)
    monkeypatch.setattr(rollback, "_last_failure_at", lambda plan: None)
    rollback.run(Back(cwd=tmp_path), None, argparse.Namespace(after_pid=None, model="a", json=False))
    assert seen[rollback_weights.RESTORE_ENV] == "d" * 64 and seen[rollback_weights.RESTORE_MODEL_ENV] == "a"
    assert set(asked) == {"a"}  # every plan it read was that model's
    assert "spark-llm:models[a] as then" in capsys.readouterr().out
