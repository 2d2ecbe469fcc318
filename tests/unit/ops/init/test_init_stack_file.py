"""The file init writes: every discovered value with its source, the program's own parse passes, and keys from a
recipe or a --config-from file merged key by key, never over what was discovered."""

from __future__ import annotations

import pytest
import yaml

from spark_llm.config import parse
from spark_llm.ops.init.document import Found, document, node_names
from spark_llm.ops.init.inputs import InitError, Wanted, parse_spec
from spark_llm.ops.init.stack_file import Extra, merge_extras, render, written_config
from spark_llm.ops.init.write import with_pulumi_keys
from spark_llm.plan.hosts import SshHost
from tests.unit.ops.init.spark_sections import spark

HEAD_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFGBJAPekFDTDj60+HuK4DwDVxKqw/X8yBqkyYxH0krl"
WORKER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILsV83G486su/3Movvp9vumrtEJHgD5IdiOIUkMUAssk"
RECIPE = Extra(
    {
        "spark-llm:model": {"name": "Qwen/Qwen3.5-122B-A10B-FP8", "path": "/home/nvidia/models/q"},
        "spark-llm:image": {"ref": "vllm/vllm-openai:v0.33.0"},
        "spark-llm:engine": {"kind": "vllm", "executor": "ray", "flags": ["--max-model-len", "32768"]},
    },
    "from recipe q (recipes/q.yaml)",
)


def two_sparks() -> list[Found]:
    head = SshHost("head", "10.1.230.180", 22, "nvidia", "/home/me/.ssh/id_ed25519", HEAD_KEY)
    worker = SshHost("worker-1", "192.168.100.11", 22, "nvidia", head.key_path, WORKER_KEY, via=head)
    return [
        Found("head", head, spark(), "ED25519 SHA256:x, accepted with --accept", "--head"),
        Found("worker", worker, spark("192.168.100.11", hostname="spark-77c1", fabric="192.168.100.11/24"),
              "ED25519 SHA256:y, accepted at the terminal", "found among the head's fabric neighbours"),
    ]  # fmt: skip


def written(extras: list[Extra]) -> str:
    return render(document(two_sparks(), "/home/me/.ssh/id_ed25519", extras, {}, "on 2026-12-05 from x"))


def test_the_file_parses_as_the_program_reads_it_and_says_where_each_value_came_from():
    text = written([RECIPE])
    config = written_config(text)
    cfg = parse({k.split(":", 1)[1]: v for k, v in config.items()})
    assert [n.name for n in cfg.nodes] == ["spark-4a2b", "spark-77c1"]
    assert cfg.nodes[1].via == "spark-4a2b" and cfg.nodes[1].host == "192.168.100.11"
    assert cfg.nodes[1].fabric_address == "192.168.100.11" and cfg.nodes[1].host_key == WORKER_KEY
    assert cfg.network.fabric_interfaces == ["enp1s0f1np1"]
    assert cfg.network.roce_devices == ["rocep1s0f1", "roceP2p1s0f1"] and cfg.network.mtu == 9000
    assert cfg.engine.flags == ["--max-model-len", "32768"]
    # Each discovered value's comment names its source, and the keys a recipe gave name the recipe.
    assert 'fabricAddress: "192.168.100.11"  # enp1s0f1np1\'s IPv4 (ip -4 addr), over RoCE rocep1s0f1' in text
    assert "    # ED25519 SHA256:y, accepted at the terminal\n    hostKey:" in text
    assert 'host: "192.168.100.11"  # found among the head\'s fabric neighbours' in text
    assert "  # from recipe q (recipes/q.yaml)\n  spark-llm:model:" in text
    assert "# Found: spark-4a2b aarch64 1x NVIDIA GB10 121.7 GiB; spark-77c1" in text


def test_a_recipe_and_a_file_merge_key_by_key_and_never_replace_what_was_discovered():
    local = Extra(
        {"spark-llm:engine": {"port": 8000}, "spark-llm:network": {"mtu": 1500, "memlockBytes": 8388608},
         "spark-llm:nodes": []},
        "from --config-from mine.yaml",
    )  # fmt: skip
    config = written_config(written([RECIPE, local]))
    assert config["spark-llm:engine"] == {"kind": "vllm", "executor": "ray", "flags": ["--max-model-len", "32768"],
                                          "port": 8000}  # fmt: skip
    assert config["spark-llm:network"]["mtu"] == 9000  # what the nodes show, not the file's 1500
    assert config["spark-llm:network"]["memlockBytes"] == 8388608
    assert len(config["spark-llm:nodes"]) == 2
    assert (
        merge_extras([RECIPE, local])["spark-llm:engine"][1]
        == "from recipe q (recipes/q.yaml); from --config-from mine.yaml"
    )


def test_pulumis_own_keys_are_kept_after_the_header():
    text = with_pulumi_keys(written([RECIPE]), {"encryptionsalt": "v1:abc"})
    assert text.startswith("# Written by `spark-llm init`")
    assert yaml.safe_load(text)["encryptionsalt"] == "v1:abc"


def test_node_names_are_hostnames_when_they_can_be():
    assert node_names(["spark-4a2b", "spark-77c1"]) == ["spark-4a2b", "spark-77c1"]
    assert node_names(["spark", "spark", ""]) == ["spark", "spark-2", "spark-3"]
    assert node_names(["Not A Name!"]) == ["spark-1"]


@pytest.mark.parametrize(
    ("text", "flag", "message"),
    [
        ("10.0.0.1", "--head", "--head '10.0.0.1' is not USER@ADDRESS[:PORT]; e.g. --head nvidia@192.168.1.10"),
        ("nvidia@10.0.0.1:ssh", "--head", "is not USER@ADDRESS[:PORT]"),
        ("nvidia@10.0.0.1:70000", "--head", "port 70000 is not 1-65535"),
    ],
)
def test_a_bad_address_is_named_with_a_valid_one(text, flag, message):
    with pytest.raises(InitError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse_spec(text, flag)


def test_a_worker_takes_the_heads_user_by_default():
    assert parse_spec("192.168.100.11", "--worker", default_user="nvidia").user == "nvidia"
    assert parse_spec("root@192.168.100.11:2222", "--worker", default_user="nvidia").port == 2222


def test_what_the_keys_ask_of_the_nodes():
    assert Wanted.of(merge_extras([RECIPE])) == Wanted(
        True, "vllm/vllm-openai:v0.33.0", "/home/nvidia/models/q", "every node"
    )
    pulled = Extra({"spark-llm:image": {"ref": "x", "mode": "transfer", "source": "operator"}}, "f")
    assert Wanted.of(merge_extras([pulled])).image_on == ""
