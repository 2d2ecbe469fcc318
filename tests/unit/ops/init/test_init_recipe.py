"""`spark-llm init --recipe`: every recipe makes a file the program's own parse accepts, its weights under the head
user's home and pinned to a revision (the recipe's, or the one the Hub serves when init runs)."""

from __future__ import annotations

import argparse

import pytest

from spark_llm.config import recipe as recipes
from spark_llm.ops.init import discover
from spark_llm.ops.init.command import Init
from spark_llm.ops.init.document import document
from spark_llm.ops.init.inputs import InitError
from spark_llm.ops.init.stack_file import render, written_config
from spark_llm.ops.pulumi_cli import PulumiCli
from tests.unit.ops.init.test_init_stack_file import two_sparks

SHA = "0123456789abcdef0123456789abcdef01234567"


def init_for(name: str) -> Init:
    args = argparse.Namespace(recipe=name, config_from=[], accept=[], worker=[], stack="s", config_file=None)
    return Init(PulumiCli(stack="s"), args)


@pytest.mark.parametrize("chosen", recipes.load_all(), ids=lambda r: r.name)
def test_every_recipe_makes_a_file_the_program_accepts(monkeypatch, chosen):
    monkeypatch.setattr(discover, "hub_revision", lambda head, repo: (SHA, ""))
    nodes = two_sparks()
    extras = init_for(chosen.name)._recipe_extras(chosen, nodes[0].ssh, nodes[0].facts, [])
    text = render(document(nodes, "/home/me/.ssh/id_ed25519", extras, {}, "on a day"))
    Init._check(text)  # the program's parse, as init runs it before writing
    config = written_config(text)
    model = config["spark-llm:model"]
    assert model["path"] == f"/home/nvidia/models/{chosen.model.name.split('/')[-1]}"
    assert model["source"]["revision"] == (chosen.model.revision or SHA)
    assert config["spark-llm:recipe"] == chosen.name
    if chosen.model.revision is None:
        assert f"(recipes/{chosen.name}.yaml); revision: the Hub's main when init ran (huggingface.co" in text


def test_a_recipe_without_a_revision_and_no_hub_answer_stops_init_saying_how_to_pin_one(monkeypatch):
    chosen = next(r for r in recipes.load_all() if r.model.revision is None)
    monkeypatch.setattr(discover, "hub_revision", lambda head, repo: (None, "curl: (6) Could not resolve host"))
    nodes = two_sparks()
    with pytest.raises(InitError) as err:
        init_for(chosen.name)._recipe_extras(chosen, nodes[0].ssh, nodes[0].facts, [])
    assert f"recipe {chosen.name} pins no revision of {chosen.model.name}" in str(err.value)
    assert "(curl: (6) Could not resolve host): pin one in a --config-from file" in str(err.value)


def test_the_hubs_answer_is_a_commit_or_a_reason():
    assert discover.parse_hub_revision(f'{{"id": "Qwen/x", "sha": "{SHA}"}}', "") == (SHA, "")
    assert discover.parse_hub_revision("", "curl: (22) The requested URL returned error: 401\n")[1].endswith("401")
    assert discover.parse_hub_revision('{"sha": "main"}', "")[0] is None
