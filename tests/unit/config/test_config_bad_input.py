"""Bad stack configs, one mistake a user could make per case: each is refused naming its key and what to write.

The table is also replayed with the real CLI against the sim (tests/integration/test_bad_input.py): so every
mutation works on any valid stack config (names and addresses are read from it, never assumed).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest

from spark_llm.config import ConfigError, parse
from tests.conftest import HEAD_KEY, PLACEHOLDER_KEY, dual_spark_raw

Mutation = Callable[[dict[str, Any]], None]
_DELETE = object()


def _target(raw: dict[str, Any], path: str) -> tuple[Any, str | int]:
    parts = path.split(".")
    target: Any = raw
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    last = parts[-1]
    return target, int(last) if last.isdigit() else last


def _set(path: str, value: Any) -> Mutation:
    """Set (or with _DELETE remove) the key at a dotted path: `nodes.1.port`."""

    def mutate(raw: dict[str, Any]) -> None:
        target, last = _target(raw, path)
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value

    return mutate


def _set_from(path: str, value_of: Callable[[dict[str, Any]], Any]) -> Mutation:
    """Set the key at `path` to a value read from the config itself (e.g. a node's own name)."""

    def mutate(raw: dict[str, Any]) -> None:
        target, last = _target(raw, path)
        target[last] = value_of(raw)

    return mutate


def _rename(path: str, new_key: str) -> Mutation:
    """Write the key at `path` under another spelling, keeping its value."""

    def mutate(raw: dict[str, Any]) -> None:
        target, last = _target(raw, path)
        target[new_key] = target.pop(last)

    return mutate


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


def _both(*mutations: Mutation) -> Mutation:
    def mutate(raw: dict[str, Any]) -> None:
        for m in mutations:
            m(raw)

    return mutate


def _name_of(index: int) -> Callable[[dict[str, Any]], Any]:
    return lambda raw: raw["nodes"][index]["name"]


REVISION = "0123456789abcdef0123456789abcdef01234567"

# (case id, mutation, key path that must be named, text that must appear)
NODES = [
    ("no-nodes", _set("nodes", []), "spark-llm:nodes", "at least 1"),
    ("models-empty-beside-model", _set("models", []), "spark-llm:models", "an empty list serves no model"),
    ("missing-nodes", _set("nodes", _DELETE), "spark-llm:nodes", "required"),
    ("nodes-one-mapping-not-a-list", _set_from("nodes", lambda raw: raw["nodes"][0]), "spark-llm:nodes", "valid list"),
    ("node-not-a-mapping", _set_from("nodes.1", _name_of(1)), "spark-llm:nodes[1]", "must be a mapping of keys (name,"),
    ("missing-head", _set("nodes.0.role", "worker"), "spark-llm:nodes", "exactly one node needs role: head (found 0)"),
    ("two-heads", _set("nodes.1.role", "head"), "spark-llm:nodes", "found 2: nodes[0]"),
    ("bad-role", _set("nodes.1.role", "master"), "spark-llm:nodes[1].role", "'head' or 'worker'"),
    ("node-name-missing", _set("nodes.1.name", _DELETE), "spark-llm:nodes[1].name", "required"),
    ("node-name-uppercase", _set("nodes.0.name", "Spark1"), "spark-llm:nodes[0].name", "lowercase"),
    ("node-name-too-long", _set("nodes.1.name", "worker-" + "x" * 30), "spark-llm:nodes[1].name", "1-31"),
    ("duplicate-name", _add_worker("name"), "spark-llm:nodes[2].name", "is already the name of nodes[1]"),
    ("unknown-node-key", _set("nodes.0.gpu", "gb10"), "spark-llm:nodes[0].gpu", "not permitted"),
    (
        "node-key-wrong-case",
        _rename("nodes.0.hostKey", "hostkey"),
        "spark-llm:nodes[0].hostkey",
        "did you mean hostKey?",
    ),
    ("port-zero", _set("nodes.0.port", 0), "spark-llm:nodes[0].port", "greater than or equal to 1"),
    ("port-too-big", _set("nodes.0.port", 70000), "spark-llm:nodes[0].port", "less than or equal to 65535"),
    ("port-not-number", _set("nodes.0.port", "ssh"), "spark-llm:nodes[0].port", "valid integer"),
    ("port-boolean", _set("nodes.1.port", True), "spark-llm:nodes[1].port", "must be a number, not true"),
    ("port-fraction", _set("nodes.1.port", 22.5), "spark-llm:nodes[1].port", "fractional part"),
    ("user-empty", _set("nodes.0.user", ""), "spark-llm:nodes[0].user", "at least 1 character"),
    ("users-differ", _set("nodes.1.user", "other"), "spark-llm:nodes[1].user", "same user"),
    ("host-bad-chars", _set("nodes.0.host", "spark 1"), "spark-llm:nodes[0].host", "IP address or a host name"),
    ("host-with-port", _set("nodes.0.host", "10.1.230.180:2222"), "spark-llm:nodes[0].host", "2222 in `port`"),
    ("host-with-user", _set("nodes.0.host", "aurora@10.1.230.180"), "spark-llm:nodes[0].host", "user in `user`"),
    ("host-url", _set("nodes.0.host", "ssh://10.1.230.180"), "spark-llm:nodes[0].host", "is a URL"),
    ("duplicate-host", _add_worker("host"), "spark-llm:nodes[2].host", "is already the host of nodes[1]"),
    ("fabric-not-ip", _set("nodes.1.fabricAddress", "spark-2.local"), "spark-llm:nodes[1].fabricAddress", "IP"),
    ("fabric-with-prefix", _set("nodes.1.fabricAddress", "192.0.2.13/24"), "nodes[1].fabricAddress", "prefix length"),
    ("fabric-loopback", _set("nodes.0.fabricAddress", "127.0.0.1"), "spark-llm:nodes[0].fabricAddress", "fabric port"),
    ("engine-host-name", _set("engine", {"host": "spark-1.lan"}), "spark-llm:engine.host", "IP address of the head"),
    ("engine-host-with-port", _set("engine", {"host": "0.0.0.0:30000"}), "spark-llm:engine.host", "e.g. 192.168.1.10"),
    (
        "duplicate-fabric-address",
        _add_worker("fabricAddress"),
        "spark-llm:nodes[2].fabricAddress",
        "is already the fabricAddress of nodes[1]",
    ),
    ("host-key-missing", _set("nodes.0.hostKey", _DELETE), "spark-llm:nodes[0].hostKey", "required"),
    ("host-key-garbage", _set("nodes.0.hostKey", "AAAA"), "spark-llm:nodes[0].hostKey", "ssh-ed25519"),
    ("host-key-bad-base64", _set("nodes.0.hostKey", "ssh-ed25519 " + "A" * 41), "nodes[0].hostKey", "not valid base64"),
    ("host-key-placeholder", _set("nodes.1.hostKey", PLACEHOLDER_KEY), "spark-llm:nodes[1].hostKey", "ssh-keyscan"),
    ("host-key-wrong-type", _set("nodes.0.hostKey", "ssh-rsa " + HEAD_KEY.split()[1]), "nodes[0].hostKey", "ssh-rsa"),
    ("worker-via-unknown", _set("nodes.1.via", "spark-9"), "spark-llm:nodes[1].via", "not a node name"),
    ("worker-via-itself", _set_from("nodes.1.via", _name_of(1)), "spark-llm:nodes[1].via", "through itself"),
    (
        "worker-via-another-worker",
        _both(_add_worker(), _set_from("nodes.2.via", _name_of(1))),
        "spark-llm:nodes[2].via",
        "is a worker: a worker is reached through the head",
    ),
    (
        "head-via-worker",
        _set_from("nodes.0.via", _name_of(1)),
        "spark-llm:nodes[0].via",
        "the head is reached directly",
    ),
]

MODEL = [
    ("model-missing", _set("model", _DELETE), "spark-llm:model", "required"),
    ("model-not-a-mapping", _set("model", "Qwen/Qwen3"), "spark-llm:model", "must be a mapping of keys (name, path"),
    ("model-name-empty", _set("model.name", ""), "spark-llm:model.name", "at least 1"),
    ("model-path-relative", _set("model.path", "models/qwen"), "spark-llm:model.path", "absolute path"),
    ("model-path-root", _set("model.path", "/"), "spark-llm:model.path", "root directory"),
    ("model-path-quote", _set("model.path", "/models/qwen's"), "spark-llm:model.path", "without quotes"),
    ("purge-not-boolean", _set("model.purgeOnDestroy", "maybe"), "model.purgeOnDestroy", "valid boolean"),
    ("source-kind-unknown", _set("model.source", {"kind": "s3"}), "spark-llm:model.source.kind", "'huggingface'"),
    (
        "hf-source-no-repo",
        _set("model.source", {"kind": "huggingface", "revision": REVISION}),
        "spark-llm:model.source.repo",
        "OWNER/NAME",
    ),
    (
        "hf-source-no-revision",
        _set("model.source", {"kind": "huggingface", "repo": "Qwen/Qwen3"}),
        "spark-llm:model.source.revision",
        "40",
    ),
    (
        "hf-source-branch",
        _set("model.source", {"kind": "huggingface", "repo": "a/b", "revision": "main"}),
        "spark-llm:model.source.revision",
        "a branch name moves",
    ),
    (
        "hf-source-short-commit",
        _set("model.source", {"kind": "huggingface", "repo": "a/b", "revision": REVISION[:7]}),
        "spark-llm:model.source.revision",
        "full 40-hex",
    ),
    (
        "hf-source-with-path",
        _set("model.source", {"kind": "huggingface", "repo": "a/b", "revision": REVISION, "path": "/w"}),
        "spark-llm:model.source.path",
        "takes no path",
    ),
    (
        "head-source-with-revision",
        _set("model.source", {"kind": "head", "path": "/w", "revision": REVISION}),
        "spark-llm:model.source.revision",
        "kind head takes no revision",
    ),
    ("head-source-relative", _set("model.source", {"kind": "head", "path": "models/x"}), "source.path", "absolute"),
    (
        "local-source-missing-dir",
        _set("model.source", {"kind": "local", "path": "/nonexistent/weights"}),
        "spark-llm:model.source.path",
        "does not exist",
    ),
]

IMAGE = [
    ("image-missing", _set("image", _DELETE), "spark-llm:image", "required"),
    ("image-mode-unknown", _set("image.mode", "scp"), "spark-llm:image.mode", "'present', 'pull' or 'transfer'"),
    ("image-ref-uppercase", _set("image.ref", "LMSysOrg/SGLang:spark"), "spark-llm:image.ref", "lmsysorg/sglang"),
    ("image-ref-url", _set("image.ref", "https://hub.docker.com/r/lmsysorg/sglang"), "image.ref", "is a URL"),
    ("image-ref-space", _set("image.ref", "lmsysorg/sglang spark"), "spark-llm:image.ref", "without spaces"),
    ("image-ref-empty-tag", _set("image.ref", "lmsysorg/sglang:"), "spark-llm:image.ref", "empty tag"),
    ("image-platform-bare", _set("image.platform", "arm64"), "spark-llm:image.platform", "'linux/arm64'"),
    (
        "image-operator-source-without-transfer",
        _both(_set("image.mode", "present"), _set("image.source", "operator")),
        "spark-llm:image.mode",
        "read by mode transfer only",
    ),
    ("image-unknown-key", _set("image.tag", "spark"), "spark-llm:image.tag", "its keys: mode, platform, ref, source"),
]

ENGINE = [
    ("engine-not-a-mapping", _set("engine", "vllm"), "spark-llm:engine", "must be a mapping of keys (kind, executor"),
    ("engine-kind-unknown", _set("engine", {"kind": "tensorrt"}), "spark-llm:engine.kind", "'sglang'"),
    ("engine-ray-with-sglang", _set("engine", {"executor": "ray"}), "spark-llm:engine.executor", "for kind vllm"),
    ("engine-port-bad", _set("engine", {"port": 0}), "spark-llm:engine.port", "greater than or equal"),
    ("engine-ports-clash", _set("engine", {"port": 20000}), "spark-llm:engine.distPort", "must differ from port"),
    (
        "engine-port-is-rays",
        _set("engine", {"kind": "vllm", "executor": "ray", "port": 6379}),
        "spark-llm:engine.port",
        "Ray's head",
    ),
    ("engine-version-uncatalogued", _set("engine", {"version": "0.5.18"}), "spark-llm:engine.version", "0.5.23"),
    (
        "engine-version-of-the-other-engine",
        _set("engine", {"kind": "vllm", "version": "0.5.23"}),
        "spark-llm:engine.version",
        "known vLLM versions",
    ),
    ("engine-gpus-not-boolean", _set("engine", {"gpus": "all"}), "spark-llm:engine.gpus", "valid boolean"),
    ("engine-container-name-bad", _set("engine", {"containerName": "Spark LLM"}), "containerName", "lowercase"),
    ("engine-flags-one-string", _set("engine", {"flags": "--trust-remote-code"}), "engine.flags", "valid list"),
    (
        "engine-flag-of-a-newer-release",
        _set("engine", {"version": "0.5.17", "flags": ["--language-model-only"]}),
        "spark-llm:engine.flags",
        "refused for SGLang 0.5.17",
    ),
    (
        "engine-executor-as-a-flag",
        _set("engine", {"kind": "vllm", "flags": ["--distributed-executor-backend", "ray"]}),
        "spark-llm:engine.flags",
        "use spark-llm:engine.executor",
    ),
    ("engine-key-misspelled", _set("engine", {"distport": 20001}), "engine.distport", "did you mean distPort?"),
    ("engine-env-bad-name", _set("engine", {"env": {"NCCL DEBUG": "1"}}), "spark-llm:engine.env", "not a valid"),
    ("engine-env-two-lines", _set("engine", {"env": {"A": "1\nB=2"}}), "spark-llm:engine.env.A", "one line"),
    (
        "engine-env-turns-ray-auth-off",
        _set("engine", {"kind": "vllm", "executor": "ray", "env": {"RAY_AUTH_MODE": "disabled"}}),
        "spark-llm:engine.env.RAY_AUTH_MODE",
        "set by spark-llm with executor ray: every Ray process runs with Ray's token authentication",
    ),
    (
        "engine-env-swaps-the-ray-token",
        _set("engine", {"kind": "vllm", "executor": "ray", "env": {"RAY_AUTH_TOKEN": "x"}}),
        "spark-llm:engine.env.RAY_AUTH_TOKEN",
        "remove this key",
    ),
]

OTHER = [
    ("network-bad-interface", _set("network", {"fabricInterfaces": ["en p1"]}), "fabricInterfaces[0]", "interface"),
    ("network-interfaces-one-string", _set("network", {"fabricInterfaces": "eth0"}), "fabricInterfaces", "valid list"),
    (
        "network-roce-devices-in-one-item",
        _set("network", {"roceDevices": ["rocep1s0f0 roceP2p1s0f0"]}),
        "spark-llm:network.roceDevices[0]",
        "(e.g. rocep1s0f0)",
    ),
    ("network-mtu-too-big", _set("network", {"mtu": 9600}), "spark-llm:network.mtu", "less than or equal to 9216"),
    ("network-fabric-proof-off", _set("network", {"fabricProof": "off"}), "network.fabricProof", "'fail' or 'warn'"),
    ("network-memlock-below-unlimited", _set("network", {"memlockBytes": -5}), "network.memlockBytes", "-1"),
    ("timeouts-too-short", _set("timeouts", {"readySeconds": 1}), "spark-llm:timeouts.readySeconds", "greater"),
    ("timeouts-duration-text", _set("timeouts", {"readySeconds": "15m"}), "timeouts.readySeconds", "valid integer"),
    ("timeouts-grace-too-long", _set("timeouts", {"startupGraceSeconds": 600}), "startupGraceSeconds", "300"),
    ("timeouts-transfer-too-short", _set("timeouts", {"transferSeconds": 30}), "transferSeconds", "60"),
    ("transfer-streams-zero", _set("transfer", {"streams": 0}), "spark-llm:transfer.streams", "greater than or equal"),
    ("transfer-encrypt-not-boolean", _set("transfer", {"encrypt": "aes"}), "transfer.encrypt", "valid boolean"),
    ("ssh-key-path-list", _set("sshKeyPath", ["~/.ssh/a", "~/.ssh/b"]), "spark-llm:sshKeyPath", "valid string"),
    ("unknown-top-level-key", _set("modle", {}), "spark-llm:modle", "did you mean spark-llm:model?"),
    ("recipe-unknown", _set("recipe", "minimax-m2.7"), "spark-llm:recipe", "; known recipes: "),
    (
        "top-level-key-snake-case",
        _rename("sshKeyPath", "ssh_key_path"),
        "spark-llm:ssh_key_path",
        "spark-llm:sshKeyPath",
    ),
]


def _put(section: str, key: str, value: Any) -> Mutation:
    """Set `section.key`, the section made if the config has none."""

    def mutate(raw: dict[str, Any]) -> None:
        raw.setdefault(section, {})[key] = value

    return mutate


# Found trying the product as a new user (issue 31, 9): each deployed and served before.
NEW_USER = [
    (
        "model-name-invisible-character",
        _set("model.name", "Qwen/Qwen3.5\u200b-122B-A10B-FP8"),
        "spark-llm:model.name",
        "holds ZERO WIDTH SPACE (U+200B) at position 13",
    ),
    ("model-name-em-dash", _set("model.name", "Qwen3.5\u2014FP8"), "spark-llm:model.name", "EM DASH (U+2014)"),
    ("ready-seconds-beyond-a-day", _put("timeouts", "readySeconds", 10**20), "spark-llm:timeouts.readySeconds", ""),
    ("ready-seconds-two-days", _put("timeouts", "readySeconds", 172800), "spark-llm:timeouts.readySeconds", "86400"),
    (
        "flag-value-typed-as-a-number-by-the-cli",
        _put("engine", "flags", ["--mem-fraction-static", 2]),
        "spark-llm:engine.flags[1]",
        "again with `--type string`, e.g. `pulumi config set --path --type string 'spark-llm:engine.flags[1]' 2`",
    ),
]

# Issue 41, 7: a newline inside a flag's value was accepted, and split the engine's command line.
NEW_USER.append(
    (
        "flag-value-with-a-newline",
        _put("engine", "flags", ["--mem-fraction-static", "0.8\n--evil"]),
        "spark-llm:engine.flags[1]",
        "holds a control character (a newline, a tab)",
    )
)

# A wedge bound below three probes' worth, or a word (issue 32, 5).
WEDGE = [
    ("wedge-seconds-too-small", _put("supervisor", "wedgeSeconds", 1), "spark-llm:supervisor.wedgeSeconds", "e.g. 180"),
    ("wedge-seconds-a-word", _put("supervisor", "wedgeSeconds", "long"), "spark-llm:supervisor.wedgeSeconds", ""),
]

# spark-llm:router (issue 34): refused before anything runs, whatever the stack's key (the port's is named first).
ROUTER_ID = "sha256:" + "ab" * 32
ROUTER = [
    ("router-image-tag", _set("router", {"image": "lightseekorg/smg:1.13.0"}), "spark-llm:router.image", "@sha256:"),
    (
        "router-port-is-the-engines",
        _set_from("router", lambda raw: {"image": ROUTER_ID, "port": raw.get("engine", {}).get("port", 30000)}),
        "spark-llm:router.port",
        "is also spark-llm:engine.port on the head",
    ),
]

BROKEN = NODES + MODEL + IMAGE + ENGINE + OTHER + NEW_USER + WEDGE + ROUTER


def test_every_case_is_its_own():
    ids = [case[0] for case in BROKEN]
    assert len(ids) == len(set(ids)) >= 60


@pytest.mark.parametrize(("mutate", "key", "text"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_config_is_refused_naming_the_key(mutate: Mutation, key: str, text: str):
    raw = dual_spark_raw()
    mutate(raw)
    with pytest.raises(ConfigError) as err:
        parse(raw)
    message = str(err.value)
    assert key in message, message
    assert text in message, message
    # A line starts with the key, then says what is wrong; no value is spelled the Python way.
    assert re.search(rf"^\s*spark-llm:\S*{re.escape(key.removeprefix('spark-llm:'))}: ", message, re.M), message
    assert not re.search(r"\b(True|False|None)\b", message), message


def test_every_mistake_in_one_engine_env_map_is_reported_at_once():
    """Two bad entries in engine.env were refused one preview at a time: fix one, meet the next."""
    raw = dual_spark_raw()
    raw["engine"] = {**raw.get("engine", {}), "env": {"NCCL DEBUG": "1", "OK": "x", "A": "1\nB=2", "9X": "y"}}
    with pytest.raises(ConfigError) as err:
        parse(raw)
    lines = str(err.value).splitlines()[1:]
    assert [line.split(": ", 1)[0].strip() for line in lines] == [
        "spark-llm:engine.env",
        "spark-llm:engine.env.A",
        "spark-llm:engine.env",
    ], lines
    assert "'NCCL DEBUG' is not a valid environment variable name" in lines[0]
    assert "must be one line" in lines[1]
    assert "'9X' is not a valid environment variable name" in lines[2]
