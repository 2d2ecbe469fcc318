"""Random input through the program's own readers: never a traceback, always a message that names the key.

Stack configs: random nested shapes (mappings, lists, text, numbers, booleans, null), with the real key names
mixed with made-up ones, given to the program the way Pulumi gives them (every `spark-llm:` value as text,
objects as JSON) and read with the functions components.bootstrap.load calls. Either the config parses, or it
raises ConfigError whose message has a line starting with a `spark-llm:` key the user wrote (or must write).
Engine flags: random token lists against every catalogued release; each refusal is one line naming the release.

Deterministic for CI: derandomized, no example database.
"""

from __future__ import annotations

import copy
import json
import string
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from spark_llm import config as config_module
from spark_llm.config import NAMESPACE, ConfigError, StackConfig, engine_flags, parse, raw_from_pulumi
from tests.conftest import HEAD_KEY, PLACEHOLDER_KEY, WORKER_KEY, dual_spark_raw

SETTINGS = settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _keys(model: type[BaseModel]) -> set[str]:
    """Every key of a section and of the sections inside it, as written in Pulumi.<stack>.yaml."""
    found: set[str] = set()
    for name, field in model.model_fields.items():
        found.add(field.alias or name)
        for inner in (field.annotation, *getattr(field.annotation, "__args__", ())):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                found |= _keys(inner)
    return found


TOP_LEVEL = sorted(config_module.TOP_LEVEL_KEYS)
# model and image are required unless spark-llm:models stands for them (the schema's default is None for that).
REQUIRED = {k for k, name in config_module.TOP_LEVEL_KEYS.items() if StackConfig.model_fields[name].is_required()} | {
    "model",
    "image",
}
REAL_KEYS = sorted(_keys(StackConfig))


def _full_raw() -> dict[str, Any]:
    """A valid config with every section written out, so random edits reach every validator."""
    raw = dual_spark_raw()
    raw["model"]["source"] = {"kind": "head", "path": "/home/aurora/models/x"}
    raw["engine"] = {
        "kind": "vllm",
        "executor": "ray",
        "version": "0.33.0",
        "flags": ["--max-num-seqs", "8"],
        "env": {"NCCL_DEBUG": "INFO"},
    }
    raw["network"] = {"fabricInterfaces": ["enp1s0f0np0"], "roceDevices": ["rocep1s0f0"], "mtu": 9000}
    raw["timeouts"] = {"readySeconds": 900}
    raw["transfer"] = {"streams": 4, "encrypt": False}
    return raw


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


# Values a user would write somewhere in the file: every choice, addresses, keys, paths, flags, releases.
WORDS = [
    "",
    "head",
    "worker",
    "sglang",
    "vllm",
    "native",
    "ray",
    "huggingface",
    "local",
    "present",
    "pull",
    "transfer",
    "operator",
    "linux/arm64",
    "spark-1",
    "spark-2",
    "10.1.230.180",
    "192.168.200.13",
    "127.0.0.1",
    "a@b:22",
    HEAD_KEY,
    WORKER_KEY,
    PLACEHOLDER_KEY,
    "/models/x",
    "models/x",
    "/",
    "~/.ssh/id_ed25519",
    "Qwen/Qwen3",
    "0123456789abcdef0123456789abcdef01234567",
    "lmsysorg/sglang:spark",
    "0.5.23",
    "0.5.17",
    "0.33.0",
    "--port",
    "--mem-fraction-static",
    "0.8",
    "--",
    "\u2014trust-remote-code",
    "true",
    "null",
    "22",
]
# ... and the valid config's own values, so that one key takes another's (two nodes with one address).
WORDS += [leaf for leaf in dict.fromkeys(_leaves(_full_raw())) if isinstance(leaf, str) and leaf not in WORDS]
NAME_CHARS = string.ascii_letters + string.digits + "_-"

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(WORDS)
)
keys = st.sampled_from(REAL_KEYS) | st.text(NAME_CHARS, min_size=1, max_size=10)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=16,
)


RELEASES = [(e, v) for e in engine_flags.ENGINE_NAMES for v in engine_flags.known_versions(e)]
OPTIONS = sorted({o for e, v in RELEASES for o in engine_flags.load_catalog(e, v).option_strings})
tokens = (
    st.sampled_from(OPTIONS)
    | st.sampled_from(OPTIONS).map(lambda o: o[: max(3, len(o) // 2)])  # abbreviations
    | st.sampled_from(OPTIONS).map(lambda o: o.replace("-", "_"))
    | st.sampled_from(OPTIONS).map(lambda o: f"{o}=1")
    | st.sampled_from(WORDS)
    | st.text(max_size=12)
    | st.text("-=_ .,:0123456789abkK\u2013\u2014", max_size=8)  # punctuation: where readers slip
)


def _pool(*choices: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from(choices)


def _mostly(good: tuple[Any, ...], *bad: Any) -> st.SearchStrategy[Any]:
    """One of `good` about four times in five, else one of `bad`."""
    return st.sampled_from(good * 4 * max(1, len(bad) // len(good)) + bad)


NAMES = ("spark-1", "spark-2", "w3", "w4")


@st.composite
def pooled_nodes(draw: st.DrawFn) -> list[dict[str, Any]]:
    """One to four nodes, each mostly valid and its own (name, addresses), sometimes taking another's:
    so the rules between nodes (one head, names, addresses, `via`, user) are all reached, and broken."""
    count = draw(st.integers(1, 4))
    nodes = []
    for i in range(count):
        node = {
            "name": draw(_mostly((NAMES[i],), *NAMES, "W3")),
            "role": draw(_mostly(("head" if i == 0 else "worker",), "head", "worker", "master")),
            "host": draw(_mostly((f"10.0.0.{i + 1}",), "10.0.0.1", "10.0.0.9:22")),
            "fabricAddress": draw(_mostly((f"192.168.200.{i + 1}",), "192.168.200.1", "0.0.0.0")),
            "hostKey": draw(_mostly((HEAD_KEY, WORKER_KEY), PLACEHOLDER_KEY)),
        }
        optional = {
            "via": _mostly((None, *NAMES[:count]), "spark-9"),
            "user": _mostly(("aurora",), "root", ""),
            "port": _mostly((22, 2222), 0, True),
            "keyPath": _pool("~/.ssh/id_ed25519", None),
        }
        for key in draw(st.sets(st.sampled_from(sorted(optional)))):
            node[key] = draw(optional[key])
        nodes.append(node)
    return nodes


ENGINE = st.fixed_dictionaries(
    {},
    optional={
        "kind": _pool("sglang", "vllm", "trt"),
        "executor": _pool("native", "ray"),
        "version": _pool(*(v for e, v in RELEASES), "0.5.18", 0.5),
        "port": _pool(30000, 20000, 6379),
        "distPort": _pool(20000, 6379, 30000),
        "flags": st.lists(tokens, max_size=4),
        "env": st.dictionaries(_pool("NCCL_DEBUG", "BAD NAME", "X"), _pool("INFO", "a\nb", 1, True, None), max_size=2),
    },
)
SOURCE = st.fixed_dictionaries(
    {"kind": _pool("huggingface", "head", "local", "s3")},
    optional={
        "repo": _pool("Qwen/Qwen3", "Qwen3"),
        "revision": _pool("0123456789abcdef0123456789abcdef01234567", "main"),
        "path": _pool("/models/x", "models/x", "/nonexistent"),
    },
)
pooled_configs = st.fixed_dictionaries(
    {
        "nodes": pooled_nodes(),
        "model": st.fixed_dictionaries(
            {"name": _pool("m", ""), "path": _pool("/models/m", "/", "models/m")},
            optional={"source": SOURCE | st.none(), "purgeOnDestroy": _pool(True, "maybe")},
        ),
        "image": st.fixed_dictionaries(
            {"ref": _pool("lmsysorg/sglang:spark", "LMSysOrg/SGLang", "a b", "x:")},
            optional={
                "mode": _pool("present", "pull", "transfer", "scp"),
                "source": _pool("head", "operator"),
                "platform": _pool("linux/arm64", "arm64"),
            },
        ),
    },
    optional={"engine": ENGINE, "sshKeyPath": _pool("~/.ssh/id_ed25519", ["a"])},
)


@st.composite
def edited_configs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid config with one to four random edits anywhere in it: set, add or delete a key or a list item."""
    raw = draw(st.sampled_from([_full_raw, dual_spark_raw]))()
    for _ in range(draw(st.integers(1, 4))):
        container: Any = raw
        while True:
            # Sorted, then drawn: the first slot is what hypothesis draws most; deeper edits are the likelier.
            slots = sorted(container, key=str) if isinstance(container, dict) else list(range(len(container)))
            slot = draw(st.sampled_from(slots)) if slots else None
            child = container[slot] if slot is not None else None
            if isinstance(child, dict | list) and child and draw(st.integers(0, 3)) > 0:
                container = child
                continue
            break
        action = draw(st.sampled_from(["set", "add", "copy", "delete"]))
        if action == "delete" and slot is not None:
            del container[slot]
        elif action == "copy" and isinstance(container, list) and container:
            container.append(copy.deepcopy(draw(st.sampled_from(container))))  # a second node, flag, ...
        elif action == "add" and isinstance(container, list):
            container.append(draw(values))
        elif action == "add":
            container[draw(keys)] = draw(values)
        elif slot is not None:
            container[slot] = draw(values)
    return raw


random_configs = st.dictionaries(
    st.sampled_from(TOP_LEVEL) | st.text(NAME_CHARS, min_size=1, max_size=12), values, max_size=6
)


def _as_pulumi_gives_it(raw: dict[str, Any]) -> dict[str, str]:
    """`pulumi config` hands the program every value as text: strings as written, anything else as JSON."""
    return {f"{NAMESPACE}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}


def _check_loads_or_names_a_key(raw: dict[str, Any], secrets: set[str]) -> None:
    values = raw_from_pulumi(_as_pulumi_gives_it(raw))
    try:
        cfg = parse(values, secret_keys=secrets)
    except ConfigError as err:
        message = str(err)
        named = [line.strip() for line in message.splitlines() if line.strip().startswith(f"{NAMESPACE}:")]
        assert named, message
        written = set(values) | REQUIRED
        assert any(line[len(NAMESPACE) + 1 :].startswith(tuple(written)) for line in named), message
        assert "Traceback" not in message
    else:
        assert isinstance(cfg, StackConfig)


secret_sets = st.sets(st.sampled_from(config_module.SECRET_KEYS))


@SETTINGS
@given(raw=edited_configs(), secrets=secret_sets)
def test_an_edited_config_loads_or_names_the_key(raw: dict[str, Any], secrets: set[str]):
    _check_loads_or_names_a_key(raw, secrets)


@SETTINGS
@given(raw=pooled_configs, secrets=secret_sets)
def test_nodes_and_sections_from_a_few_values_load_or_name_the_key(raw: dict[str, Any], secrets: set[str]):
    _check_loads_or_names_a_key(raw, secrets)


@settings(SETTINGS, max_examples=150)  # mostly refused at the top level: fewer examples say as much
@given(raw=random_configs, secrets=secret_sets)
def test_a_random_shape_loads_or_names_the_key(raw: dict[str, Any], secrets: set[str]):
    _check_loads_or_names_a_key(raw, secrets)


@SETTINGS
@given(release=st.sampled_from(RELEASES), flags=st.lists(tokens, max_size=6))
def test_random_flags_are_judged_one_line_each_naming_the_release(release: tuple[str, str], flags: list[str]):
    engine, version = release
    name = f"{engine_flags.ENGINE_NAMES[engine]} {version}"
    problems = engine_flags.check_flags(engine, version, flags, engine_flags.OWNED_FLAGS[engine])
    warnings = engine_flags.flag_warnings(engine, version, flags)
    for problem in problems + warnings:
        assert name in problem.message and "\n" not in problem.message, problem
        assert f"`{engine_flags.printable(problem.flag)}" in problem.message, problem
