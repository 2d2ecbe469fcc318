"""Stack config parsing: valid configs load, each broken one is refused naming its key and a valid value."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

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


Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        parts = path.split(".")
        target: Any = raw
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        last = parts[-1]
        if value is _DELETE:
            del target[int(last) if last.isdigit() else last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


_DELETE = object()


def _add_worker(*same: str) -> Mutation:
    """A second worker, fresh everywhere except the fields named in `same` (copied from the first worker)."""

    def mutate(raw: dict[str, Any]) -> None:
        first = raw["nodes"][1]
        worker = copy.deepcopy(first)
        # TEST-NET-1 addresses: never contacted, the config is refused first.
        worker.update(name="extra-worker", host="192.0.2.14", fabricAddress="192.0.2.14")
        worker.update({key: first[key] for key in same})
        raw["nodes"].append(worker)

    return mutate


# (case id, mutation, key path that must be named, text that must appear)
BROKEN = [
    ("no-nodes", _set("nodes", []), "spark-llm:nodes", "at least 1"),
    ("missing-nodes", _set("nodes", _DELETE), "spark-llm:nodes", "required"),
    ("missing-head", _set("nodes.0.role", "worker"), "spark-llm:nodes", "exactly one node needs role: head"),
    ("two-heads", _set("nodes.1.role", "head"), "spark-llm:nodes", "found 2"),
    ("bad-role", _set("nodes.1.role", "master"), "spark-llm:nodes[1].role", "'head' or 'worker'"),
    ("duplicate-fabric-address", _add_worker("fabricAddress"), "spark-llm:nodes", "same fabricAddress"),
    ("duplicate-host", _add_worker("host"), "spark-llm:nodes", "same host"),
    ("duplicate-name", _add_worker("name"), "spark-llm:nodes", "unique"),
    ("port-zero", _set("nodes.0.port", 0), "spark-llm:nodes[0].port", "greater than or equal to 1"),
    ("port-too-big", _set("nodes.0.port", 70000), "spark-llm:nodes[0].port", "less than or equal to 65535"),
    ("port-not-number", _set("nodes.0.port", "ssh"), "spark-llm:nodes[0].port", "valid integer"),
    ("engine-port-bad", _set("engine", {"port": 0}), "spark-llm:engine.port", "greater than or equal"),
    ("engine-ports-clash", _set("engine", {"port": 20000}), "spark-llm:engine", "must differ"),
    ("worker-via-unknown", _set("nodes.1.via", "spark-9"), "spark-llm:nodes", "not a node name"),
    ("users-differ", _set("nodes.1.user", "other"), "spark-llm:nodes", "same user"),
    ("worker-via-itself", _set("nodes.1.via", "spark-2"), "spark-llm:nodes", "cannot name the node itself"),
    ("fabric-not-ip", _set("nodes.1.fabricAddress", "spark-2.local"), "spark-llm:nodes[1].fabricAddress", "IP"),
    ("host-bad-chars", _set("nodes.0.host", "spark 1"), "spark-llm:nodes[0].host", "IP address or a host name"),
    ("host-key-missing", _set("nodes.0.hostKey", _DELETE), "spark-llm:nodes[0].hostKey", "required"),
    ("host-key-garbage", _set("nodes.0.hostKey", "AAAA"), "spark-llm:nodes[0].hostKey", "ssh-ed25519"),
    ("host-key-placeholder", _set("nodes.1.hostKey", PLACEHOLDER_KEY), "spark-llm:nodes[1].hostKey", "ssh-keyscan"),
    ("host-key-wrong-type", _set("nodes.0.hostKey", "ssh-rsa " + HEAD_KEY.split()[1]), "nodes[0].hostKey", "ssh-rsa"),
    (
        "hf-source-no-revision",
        _set("model.source", {"kind": "huggingface", "repo": "Qwen/Qwen3"}),
        "model.source",
        "40",
    ),
    (
        "hf-source-branch",
        _set("model.source", {"kind": "huggingface", "repo": "a/b", "revision": "main"}),
        "spark-llm:model.source",
        "pin",
    ),
    (
        "local-source-missing-dir",
        _set("model.source", {"kind": "local", "path": "/nonexistent/weights"}),
        "spark-llm:model.source",
        "does not exist",
    ),
    ("head-source-relative", _set("model.source", {"kind": "head", "path": "models/x"}), "model.source", "absolute"),
    (
        "network-bad-interface",
        _set("network", {"fabricInterfaces": ["en p1"]}),
        "network.fabricInterfaces",
        "interface",
    ),
    ("timeouts-too-short", _set("timeouts", {"readySeconds": 1}), "spark-llm:timeouts.readySeconds", "greater"),
    ("node-name-uppercase", _set("nodes.0.name", "Spark1"), "spark-llm:nodes[0].name", "lowercase"),
    ("unknown-node-key", _set("nodes.0.gpu", "gb10"), "spark-llm:nodes[0].gpu", "not permitted"),
    ("model-missing", _set("model", _DELETE), "spark-llm:model", "required"),
    ("model-path-relative", _set("model.path", "models/qwen"), "spark-llm:model.path", "absolute path"),
    ("model-name-empty", _set("model.name", ""), "spark-llm:model.name", "at least 1"),
    ("image-missing", _set("image", _DELETE), "spark-llm:image", "required"),
    ("image-mode-unknown", _set("image.mode", "scp"), "spark-llm:image.mode", "'present', 'pull' or 'transfer'"),
    ("engine-kind-unknown", _set("engine", {"kind": "tensorrt"}), "spark-llm:engine.kind", "'sglang'"),
    ("engine-env-bad-name", _set("engine", {"env": {"NCCL DEBUG": "1"}}), "spark-llm:engine.env", "not a valid"),
    ("unknown-top-level-key", _set("modle", {}), "spark-llm:modle", "unknown configuration key"),
]


@pytest.mark.parametrize(("mutate", "key", "text"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_config_is_refused_naming_the_key(mutate: Mutation, key: str, text: str):
    raw = dual_spark_raw()
    mutate(raw)
    with pytest.raises(ConfigError) as err:
        parse(raw)
    message = str(err.value)
    assert key in message, message
    assert text in message, message


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
