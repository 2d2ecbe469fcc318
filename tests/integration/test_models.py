"""Several models in one stack on the sim (spark-llm:models): one engine group each, each living its own life.

User story: an operator serves one model across head and worker, then lists a second, small one on the head beside
it: `pulumi preview` shows only the new model's resources being created, and `pulumi up` starts it without
restarting the first. Later they change a flag of the small one: `pulumi preview` names only the small model's
group, and while `pulumi up` restarts it, a client asking the big model every 100 ms sees no failure. The operator
CLI acts per model: `spark-llm status` shows both groups, `spark-llm restart --model` restarts one, and after a
failed start of the small one `spark-llm rollback --model` brings back that one alone.
"""

from __future__ import annotations

import json

import pytest
import yaml

from bench.steady_client import BIG_FLAGS, SMALL, SteadyClient, two_models
from tests.integration.conftest import complete
from tests.integration.test_ops import SparkLlm

pytestmark = pytest.mark.integration

BIG = "spark-llm/standin-model"


def use_two_models(pulumi, small_flags: tuple[str, ...]) -> None:
    pulumi.reset_config()
    document = yaml.safe_load(pulumi.config_file.read_text())
    two_models(document["config"], small_flags)
    pulumi.config_file.write_text(yaml.safe_dump(document, sort_keys=False))


def changed_steps(pulumi) -> dict[str, str]:
    """`pulumi preview --json`: every step that is not `same`, by resource name."""
    preview = json.loads(pulumi("preview", "--json").stdout)
    return {s["urn"].rsplit("::", 1)[-1]: s["op"] for s in preview["steps"] if s["op"] not in ("same", "read")}


@pytest.fixture(scope="module")
def two_deployed(pulumi):
    """The sim's one model deployed, then a second listed beside it: the first keeps serving from its container."""
    pulumi.reset_config()
    document = yaml.safe_load(pulumi.config_file.read_text())
    # A model beside another needs its memory budget set (placement): this one had it from the start.
    document["config"]["spark-llm:engine"]["flags"] = list(BIG_FLAGS)
    pulumi.config_file.write_text(yaml.safe_dump(document, sort_keys=False))
    pulumi.up()
    single = pulumi.outputs()
    use_two_models(pulumi, ("--mem-fraction-static", "0.2"))
    changed = changed_steps(pulumi)
    assert changed and set(changed.values()) == {"create"}, changed
    assert all(name.startswith("spark-spark-llm-standin-small") for name in changed), changed
    pulumi.up()
    outputs = pulumi.outputs()
    assert outputs["models"][BIG]["container_ids"] == single["container_ids"]  # the first model never restarted
    return outputs


def test_two_models_each_serve_from_a_group_of_their_own(two_deployed, sim_cluster):
    models = two_deployed["models"]
    assert sorted(models) == [BIG, SMALL]
    for name, outputs in models.items():
        assert complete(outputs)["model"] == name
    assert models[BIG]["start_order"] == ["worker-1", "head"] and models[SMALL]["start_order"] == ["head"]
    running = sim_cluster.node_exec("head", "docker", "ps", "--format", "{{.Names}}").stdout.split()
    assert {"spark-llm-engine", "spark-llm-engine-spark-llm-standin-small"} <= set(running)


def test_a_flag_change_to_one_model_restarts_only_its_group_while_the_other_keeps_answering(pulumi, two_deployed):
    use_two_models(pulumi, ("--mem-fraction-static", "0.25"))
    changed = changed_steps(pulumi)
    small_group = "spark-spark-llm-standin-small-"
    assert changed and all(name.startswith(small_group) for name in changed), changed
    assert changed[f"{small_group}engine-head"] == "replace"

    big = two_deployed["models"][BIG]
    with SteadyClient(big["endpoint"], BIG) as client:
        pulumi.up()
    report = client.summary()
    assert report["requests"] >= 20, report
    assert client.failures == [], report
    after = pulumi.outputs()["models"]
    assert after[BIG]["container_ids"] == big["container_ids"]  # not restarted
    assert after[SMALL]["container_ids"] != two_deployed["models"][SMALL]["container_ids"]
    assert complete(after[SMALL])["model"] == SMALL


def test_status_shows_each_model_and_restart_of_one_model_leaves_the_other_running(pulumi, two_deployed):
    """User story: the operator asks `spark-llm status` and sees each model's group (its members, revision, verdict);
    `spark-llm restart` without --model is refused naming both; `spark-llm restart --model SMALL` restarts the small
    model's group alone, while the big one's containers stay the same."""
    cli = SparkLlm(pulumi)
    refused = cli("restart", "--yes")
    assert refused.returncode == 2 and refused.stderr == (
        f"spark-llm restart: the stack serves 2 models: name one with --model ({BIG}, {SMALL})\n"
    ), refused
    before = pulumi.outputs()["models"]
    report = cli.json("status")
    assert sorted(report["models"]) == [BIG, SMALL]
    for name, seen in report["models"].items():
        assert seen["state"] == "in sync", seen
        assert seen["config_revision"] == before[name]["group_revision"]
        assert [n["node"] for n in seen["nodes"]] == before[name]["start_order"][::-1]
        assert seen["head"]["models"] == [name]  # each group's head serves its own model
        assert seen["start_timeline"]["revision"] == before[name]["group_revision"]

    restarted = cli.json("restart", "--yes", "--model", SMALL, timeout=600)
    assert restarted["ok"] and restarted["restarted"] == ["head"], restarted
    after = pulumi.outputs()["models"]
    assert after[BIG]["container_ids"] == before[BIG]["container_ids"]  # the big model was not touched
    assert after[SMALL]["container_ids"] != before[SMALL]["container_ids"]
    assert complete(after[SMALL])["model"] == SMALL and complete(after[BIG])["model"] == BIG


def test_a_failed_start_of_one_model_rolls_back_that_model_alone(pulumi, two_deployed):
    """User story: a change to the small model crashes its engine at start; `pulumi up` fails and names the command
    that brings that model back (`spark-llm rollback ... --model SMALL`); that command puts back the small model's
    last good entry alone: it serves again on the revision it served before, and the big model's containers were
    never touched."""
    use_two_models(pulumi, ("--mem-fraction-static", "0.25"))
    before = pulumi.outputs()["models"]
    document = yaml.safe_load(pulumi.config_file.read_text())
    small = next(m for m in document["config"]["spark-llm:models"] if m["name"] == SMALL)
    small["engine"]["env"] = {**(small["engine"].get("env") or {}), "STANDIN_CRASH_AT_INIT": "all"}
    pulumi.config_file.write_text(yaml.safe_dump(document, sort_keys=False))
    failed = pulumi.up(check=False)
    assert failed.returncode != 0
    assert f"--config-file {pulumi.config_file} --model {SMALL}\n" in failed.stdout + failed.stderr

    result = SparkLlm(pulumi).json("rollback", "--model", SMALL, timeout=600)
    assert result["ok"] and result["served"], result
    assert result["revision"] == before[SMALL]["group_revision"] != result["config_asks_for"]
    after = pulumi.outputs()["models"]
    assert after[BIG]["container_ids"] == before[BIG]["container_ids"]  # the big model was not touched
    assert complete(after[SMALL])["model"] == SMALL
    assert yaml.safe_load(pulumi.config_file.read_text()) == document  # the user's stack file is not edited
