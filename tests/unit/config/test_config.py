"""Stack config parsing: valid configs load; errors name the key and show a valid value as YAML spells it.

The table of broken configs is tests/unit/test_config_bad_input.py; random ones, test_config_property.py.
"""

from __future__ import annotations

import pytest

from spark_llm.config import ConfigError, parse
from tests.conftest import HEAD_KEY, PLACEHOLDER_KEY, dual_spark_raw


def test_dual_spark_config_loads_with_defaults(raw_config):
    cfg = parse(raw_config)
    assert cfg.head.name == "spark-1"
    assert [w.name for w in cfg.workers] == ["spark-2"]
    assert cfg.engine.port == 30000 and cfg.engine.kind == "sglang"
    assert cfg.nodes[1].port == 22
    assert cfg.image.platform == "linux/arm64"


def test_error_shows_a_valid_example_value():
    raw = dual_spark_raw()
    raw["nodes"][1]["fabricAddress"] = "not-an-ip"
    with pytest.raises(ConfigError, match=r"fabricAddress: .*\(e\.g\. 192\.168\.200\.13\)"):
        parse(raw)


def test_host_key_is_stripped_and_kept_exactly(raw_config):
    raw_config["nodes"][0]["hostKey"] = f"  {HEAD_KEY} root@spark-1\n"
    assert parse(raw_config).head.host_key == f"{HEAD_KEY} root@spark-1"


def test_secret_key_in_plain_text_is_refused(raw_config):
    raw_config["hfToken"] = "hf_abc"
    with pytest.raises(ConfigError, match=r"spark-llm:hfToken is given in plain text.*--secret hfToken"):
        parse(raw_config, secret_keys=set())
    assert parse(raw_config, secret_keys={"hfToken"}).hf_token == "hf_abc"


@pytest.mark.parametrize(
    ("section", "value", "example"),
    [
        ("model", {"purgeOnDestroy": "maybe"}, "(e.g. false)"),
        ("transfer", {"encrypt": "aes"}, "(e.g. false)"),
        ("engine", {"gpus": "all"}, "(e.g. true)"),
        ("model", {"source": "hf"}, '(e.g. {"kind": "huggingface", "repo": "Qwen/Qwen3.5-122B-A10B-FP8"'),
        ("engine", {"env": "NCCL_DEBUG=INFO"}, '(e.g. {"NCCL_DEBUG": "INFO"})'),
    ],
    ids=["false", "false-nested", "true", "mapping", "env-mapping"],
)
def test_examples_are_spelled_as_yaml_not_python(section: str, value: dict, example: str):
    """Users write Pulumi.<stack>.yaml: an example says `false`, never Python's `False`."""
    raw = dual_spark_raw()
    raw[section] = {**raw.get(section, {}), **value}
    with pytest.raises(ConfigError) as err:
        parse(raw)
    message = str(err.value)
    assert example in message, message
    assert "False" not in message and "True" not in message and "'kind'" not in message, message


def test_a_keyed_mistake_shows_a_value_from_this_config():
    """`via` must name the head: the example is the head's actual name, not the schema's `spark-1`."""
    raw = dual_spark_raw()
    raw["nodes"][0]["name"] = "dgx-a"
    raw["nodes"][1]["via"] = "dgx-b"
    with pytest.raises(ConfigError, match=r"spark-llm:nodes\[1\]\.via: 'dgx-b' is not a node name.*\(e\.g\. dgx-a\)"):
        parse(raw)


def test_workers_are_reached_directly_or_through_the_head(raw_config):
    direct = {**raw_config["nodes"][1], "name": "spark-3", "host": "10.1.230.182", "fabricAddress": "192.168.200.14"}
    del direct["via"]
    raw_config["nodes"].append(direct)
    cfg = parse(raw_config)
    assert [(w.name, w.via) for w in cfg.workers] == [("spark-2", "spark-1"), ("spark-3", None)]


def test_the_same_host_through_another_jump_host_is_another_machine(raw_config):
    """One address reached from here and the same address reached from the head can be two machines."""
    other = {**raw_config["nodes"][1], "name": "spark-3", "fabricAddress": "192.168.200.14"}
    other["host"] = raw_config["nodes"][0]["host"]  # the head's own management address, but through the head
    raw_config["nodes"].append(other)
    assert parse(raw_config).nodes[2].host == raw_config["nodes"][0]["host"]


def test_every_unknown_top_level_key_is_named_on_its_own_line(raw_config):
    raw_config.update(modle={}, imgae={}, frobnicate=1)
    with pytest.raises(ConfigError) as err:
        parse(raw_config)
    lines = str(err.value).splitlines()
    assert "  spark-llm:frobnicate: unknown configuration key" in lines
    assert "  spark-llm:imgae: unknown configuration key; did you mean spark-llm:image?" in lines
    assert "  spark-llm:modle: unknown configuration key; did you mean spark-llm:model?" in lines


@pytest.mark.parametrize(
    ("index", "scan"),
    [
        (0, "run `ssh-keyscan -t ed25519 -p 22 10.1.230.180` here"),
        (1, "run `ssh-keyscan -t ed25519 -p 22 192.168.200.13` on spark-1 (192.168.200.13 is this node's address"),
    ],
    ids=["head-from-here", "worker-on-its-jump-host"],
)
def test_a_placeholder_host_key_prints_the_keyscan_that_reads_the_real_one_where_it_works(raw_config, index, scan):
    """The committed example's all-zero key: a worker's `host` is the head's view of it, so it is scanned there."""
    raw_config["nodes"][index]["hostKey"] = PLACEHOLDER_KEY
    with pytest.raises(ConfigError) as raised:
        parse(raw_config)
    assert f"spark-llm:nodes[{index}].hostKey: is the placeholder" in str(raised.value)
    assert scan in str(raised.value)
