"""spark-llm:models (spark_llm.config.models): the stack's models as one list, whichever form the stack file uses.

Each bad list is refused at parse with one line a mistake, naming the key and a valid value; a list of more than one
valid model is refused with one line (this version serves one model per stack), after every other mistake; a list
of one is the single form.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from spark_llm.config import ConfigError, parse
from spark_llm.config.engine import Engine
from spark_llm.config.group import groups
from tests.conftest import dual_spark_raw
from tests.unit.graph_mocks import ROOT


def entry(name: str, port: int, dist_port: int, nodes: list[str] | None = None, **engine: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "path": f"/models/{name}",
        "image": {"ref": "vllm/vllm-openai:v0.33.0"},
        "engine": {"kind": "vllm", "version": "0.33.0", "port": port, "distPort": dist_port, **engine},
    }
    if nodes is not None:
        out["nodes"] = nodes
    return out


def listed(*entries: dict[str, Any]) -> dict[str, Any]:
    """The dual-spark stack with its model(s) in spark-llm:models instead of the single form."""
    raw = {k: v for k, v in dual_spark_raw().items() if k not in ("model", "image", "engine")}
    return {**raw, "models": list(entries)}


def two_models() -> dict[str, Any]:
    """A big model on both nodes, a small one on the head: valid, the case the later slices serve."""
    return listed(entry("qwen", 30000, 20000), entry("embed", 30001, 20001, ["spark-1"]))


Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = raw
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value

    return mutate


# (case, mutation of two_models(), the line that must appear)
BAD_LISTS: list[tuple[str, Mutation, str]] = [
    (
        "two models with one name",
        _set("models.1.name", "qwen"),
        "spark-llm:models[1].name: qwen is also the name of spark-llm:models[0]: each model needs a name of its own"
        " (e.g. qwen-2)",
    ),
    (
        "two models with one port on a shared node",
        _set("models.1.engine.port", 30000),
        "spark-llm:models[1].engine.port: 30000 is also spark-llm:models[0]'s engine.port on spark-1: each model"
        " needs ports of its own (e.g. 30001)",
    ),
    (
        "two models with one distPort on a shared node",
        _set("models.1.engine.distPort", 20000),
        "spark-llm:models[1].engine.distPort: 20000 is also spark-llm:models[0]'s engine.distPort on spark-1: each"
        " model needs ports of its own (e.g. 20001)",
    ),
    (
        "a port that is another model's rendezvous port",
        _set("models.1.engine.port", 20000),
        "spark-llm:models[1].engine.port: 20000 is also spark-llm:models[0]'s engine.distPort on spark-1",
    ),
    (
        "a model on a node that is not in spark-llm:nodes",
        _set("models.1.nodes", ["spark-3"]),
        "spark-llm:models[1].nodes[0]: spark-3 is not in spark-llm:nodes (spark-1, spark-2) (e.g. spark-1)",
    ),
    (
        "a node listed twice",
        _set("models.1.nodes", ["spark-1", "spark-1"]),
        "spark-llm:models[1].nodes[1]: spark-1 is listed twice (e.g. spark-1)",
    ),
    (
        "a container name the first model keeps",
        _set("models.1.engine.containerName", "spark-llm-engine"),
        "spark-llm:models[1].engine.containerName: spark-llm-engine is also spark-llm:models[0]'s engine"
        " container on spark-1 (a name's letters other than a-z and 0-9 become '-'): name one container"
        " (e.g. spark-llm-engine-1)",
    ),
    (
        "two Ray groups on one node",
        lambda raw: [raw["models"][i]["engine"].update(executor="ray") for i in (0, 1)],
        "spark-llm:models[1].engine.executor: executor ray here and in spark-llm:models[0] on spark-1: both would"
        " run Ray's head on 6379; one Ray group per node: run one of them native (e.g. native)",
    ),
    (
        "an empty list",
        _set("models", []),
        "spark-llm:models: an empty list serves no model: list at least one, or remove the key and set"
        " spark-llm:model (e.g. [{name: qwen, path: /models/qwen, image: {ref: vllm/vllm-openai}}])",
    ),
    (
        "spark-llm:models and spark-llm:model both given",
        _set("model", {"name": "qwen", "path": "/models/qwen"}),
        "spark-llm:model: a stack takes the single form (spark-llm:model, image, engine) or spark-llm:models, not"
        " both: move its keys into the entry of spark-llm:models, or remove spark-llm:models",
    ),
    (
        "spark-llm:models and spark-llm:engine both given",
        _set("engine", {"kind": "vllm", "version": "0.33.0"}),
        "spark-llm:engine: a stack takes the single form (spark-llm:model, image, engine) or spark-llm:models",
    ),
    (
        "a list of one on a subset of the nodes",
        lambda raw: raw.update(models=[entry("qwen", 30000, 20000, ["spark-1"])]),
        "spark-llm:models[0].nodes: one model runs on every node of spark-llm:nodes in this version: remove nodes,"
        ' or list them all (e.g. ["spark-1", "spark-2"])',
    ),
]


@pytest.mark.parametrize(("case", "mutate", "line"), BAD_LISTS, ids=[c for c, _, _ in BAD_LISTS])
def test_a_bad_list_is_refused_at_parse_naming_the_key_and_a_valid_value(case: str, mutate: Mutation, line: str):
    raw = two_models()
    mutate(raw)
    with pytest.raises(ConfigError) as err:
        parse(raw)
    assert line in str(err.value), str(err.value)


def test_every_mistake_of_a_list_comes_at_once():
    raw = two_models()
    raw["models"][1]["name"] = "qwen"
    raw["models"][1]["nodes"] = ["spark-9"]
    with pytest.raises(ConfigError) as err:
        parse(raw)
    lines = str(err.value).splitlines()
    assert lines[0] == "invalid stack configuration:"
    assert [line.split(":")[1] for line in lines[1:]] == ["models[1].nodes[0]", "models[1].name"]


def test_several_valid_models_each_get_a_config_of_their_own_in_the_single_form():
    cfg = parse(two_models())
    assert cfg.several() and cfg.model is None
    found = {d.name: d for d in cfg.deployments()}
    assert (found["qwen"].nodes, found["embed"].nodes) == (("spark-1", "spark-2"), ("spark-1",))
    # Beside another model, each has a container of its own; the single form's name stays the single form's.
    # The first keeps the single form's names (a stack that grows a second model restarts nothing that serves).
    assert (found["qwen"].container, found["embed"].container) == ("spark-llm-engine", "spark-llm-engine-embed")
    assert (found["qwen"].key, found["embed"].key, found["embed"].config_key) == (None, "embed", "spark-llm:models[1]")
    own = {g.deployment.name: g for g in groups(cfg)}
    assert [n.name for n in own["embed"].nodes] == ["spark-1"] and own["embed"].head.name == "spark-1"
    assert [n.name for n in own["qwen"].nodes] == ["spark-1", "spark-2"]
    assert (own["embed"].model.name, own["embed"].engine.port, own["embed"].unit) == ("embed", 30001, "embed")


def test_a_model_without_the_head_is_refused_naming_its_nodes_and_the_list_with_the_head():
    raw = listed(entry("big", 30000, 20000), entry("small", 30001, 20001, ["spark-2"]))
    with pytest.raises(ConfigError) as err:
        parse(raw)
    assert (
        "spark-llm:models[1].nodes: the head (spark-1) is not among them: each model's group is led from the head:"
        ' add it (e.g. ["spark-1", "spark-2"])' in str(err.value)
    ), str(err.value)


def test_a_container_name_given_is_kept():
    raw = two_models()
    raw["models"][1]["engine"]["containerName"] = "embedder"
    assert [d.container for d in parse(raw).deployments()] == ["spark-llm-engine", "embedder"]


def test_a_list_of_one_is_the_single_form_with_the_same_keys():
    single_raw = dual_spark_raw()
    single_raw["engine"] = {"kind": "vllm", "version": "0.33.0", "flags": ["--max-num-seqs", "8"]}
    one = {**single_raw["model"], "image": single_raw["image"], "engine": single_raw["engine"]}
    single, as_list = parse(copy.deepcopy(single_raw)), parse(listed(one))
    # The list's model, image and engine are its entry's: the stack's own single-form keys stay unset (None).
    assert (as_list.model, as_list.image) == (None, None)
    [of_list], [of_single] = groups(as_list), groups(single)
    assert (of_list.model, of_list.image, of_list.engine) == (of_single.model, of_single.image, of_single.engine)
    [deployed] = as_list.deployments()
    assert (deployed.key, deployed.container, deployed.nodes) == (None, "spark-llm-engine", ("spark-1", "spark-2"))
    assert deployed.config_key == "spark-llm:models[0]"


def test_the_single_form_is_one_deployment_of_todays_identity():
    [deployed] = parse(dual_spark_raw()).deployments()
    assert (deployed.name, deployed.key, deployed.config_key) == (
        "Qwen/Qwen3.5-122B-A10B-FP8",
        None,
        "spark-llm:model",
    )
    assert (deployed.container, deployed.nodes) == ("spark-llm-engine", ("spark-1", "spark-2"))


def test_pulumis_defaults_for_the_unset_form_read_as_unset():
    # Pulumi.yaml must give a declared optional key a default: {} for model and image, the engine's defaults.
    one = listed(entry("qwen", 30000, 20000))
    as_pulumi = {**one, "model": {}, "image": {}, "engine": Engine().model_dump(by_alias=True)}
    assert groups(parse(as_pulumi))[0].engine.kind == "vllm"


def test_models_is_not_declared_in_pulumi_yaml_so_an_unset_stack_passes_no_default():
    # Issue 41: declared, its default [] stood in for an unset key, and `models: []` beside model was taken
    # (tests/unit/config/test_config_bad_input.py: now refused naming the key).
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    assert "spark-llm:models" not in declared and "spark-llm:model" in declared


def test_neither_form_names_both_keys():
    raw = {k: v for k, v in dual_spark_raw().items() if k != "model"}
    with pytest.raises(ConfigError) as err:
        parse(raw)
    assert "spark-llm:model: required: this key is missing (or list the models in spark-llm:models)" in str(err.value)


def test_the_documented_example_loads_as_two_models():
    text = (ROOT / "docs" / "configuration.md").read_text().split("## Several models")[1]
    example = yaml.safe_load(text.split("```yaml")[1].split("```")[0])
    cfg = parse(listed(*example["spark-llm:models"]))
    own = {g.deployment.name: g for g in groups(cfg)}
    assert (own["Qwen/Qwen3.5-122B-A10B-FP8"].engine.executor, [n.name for n in own["embed"].nodes]) == (
        "ray",
        ["spark-1"],
    )
