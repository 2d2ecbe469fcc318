"""Several models in one stack on the sim (spark-llm:models): one engine group each, each living its own life.

User story: an operator serves one model across head and worker, then lists a second, small one on the head beside
it: `pulumi preview` shows only the new model's resources being created, and `pulumi up` starts it without
restarting the first. Later they change a flag of the small one: `pulumi preview` names only the small model's
group, and while `pulumi up` restarts it, a client asking the big model every 100 ms sees no failure.
"""

from __future__ import annotations

import json

import pytest
import yaml

from bench.steady_client import BIG_FLAGS, SMALL, SteadyClient, two_models
from tests.integration.conftest import complete

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
