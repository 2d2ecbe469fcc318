"""Engine flags checked against the engine's own parser, for the exact release deployed, before anything runs.

The catalogs in `spark_llm/config/engine_catalogs/` (data; provenance in its README) list every option string that
SGLang's and vLLM's argument parsers accept in one release: names, aliases, negations, value types, choices.
`check_flags` reads the user's extra flags the way that parser would and returns a FlagProblem for every flag
the engine would refuse, and for a few it would take but the program refuses on purpose:

- an abbreviation (argparse `allow_abbrev`) is refused in favour of the full name, although the engine takes
  it: a unique prefix in one release can be ambiguous in the next (`--cuda-graph-max-bs` in SGLang 0.5.23);
- a flag the program sets itself (`owned`: topology, ports, model, secrets) is refused, naming the config key
  to use instead; its aliases and abbreviations too;
- vLLM turns `_` into `-` in flag names and SGLang does not: `--max_model_len` passes for vLLM only (SGLang's
  `--tensor_parallel_size` is refused for its spelling first, then named as the flag spark-llm sets);
- a number outside the range the engine enforces when it builds its config (`NUMERIC_RANGES`: the memory
  fractions) is refused, although the parser takes any float;
- where a catalog keeps a flag's values only in its metavar (vLLM 0.33's `--kv-cache-dtype`), those values are
  its choices, except for the flags whose values plugins extend (`_OPEN_METAVARS`).

`flag_warnings` lists the flags the release takes but its catalog marks deprecated (`pulumi preview` shows them).

Pure: no Pulumi, no I/O except reading the packaged catalogs.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
CATALOG_DIR = "engine_catalogs"
_CATALOG_FILE = re.compile(r"^(?P<engine>[a-z]+)-(?P<version>\d+(?:\.\d+)+)\.json$")

# The flags the launch plan sets (plan/deployment.py engine_args and head_args, the launch script's --node-rank)
# -> the config key to use instead. Secrets are owned too: a flag's value lands in the launch script and in
# `ps` on every node, while apiKey/hfToken travel as Pulumi secrets.
OWNED_FLAGS: dict[str, dict[str, str]] = {
    "sglang": {
        "--model-path": "spark-llm:model.path",
        "--served-model-name": "spark-llm:model.name",
        "--tp-size": "spark-llm:nodes (tensor parallel over one GPU per node)",
        "--nnodes": "spark-llm:nodes (one per node)",
        "--node-rank": "spark-llm:nodes (ranks follow the list, the head is 0)",
        "--dist-init-addr": "spark-llm:engine.distPort (on the head's fabricAddress)",
        "--port": "spark-llm:engine.port",
        "--host": "spark-llm:engine.host (the address the head's API listens on)",
        "--api-key": "spark-llm:apiKey (a secret)",
        "--config": "spark-llm:engine.flags (flags in a file would escape this check)",
    },
    "vllm": {
        "--model": "spark-llm:model.path",
        "--served-model-name": "spark-llm:model.name",
        "--tensor-parallel-size": "spark-llm:nodes (tensor parallel over one GPU per node)",
        "--nnodes": "spark-llm:nodes (one per node)",
        "--node-rank": "spark-llm:nodes (ranks follow the list, the head is 0)",
        "--master-addr": "spark-llm:nodes (the head's fabricAddress)",
        "--master-port": "spark-llm:engine.distPort",
        "--headless": "spark-llm:nodes (every worker runs headless)",
        "--distributed-executor-backend": "spark-llm:engine.executor (native or ray)",
        "--port": "spark-llm:engine.port",
        "--host": "spark-llm:engine.host (the address the head's API listens on)",
        "--api-key": "spark-llm:apiKey (a secret)",
        "--hf-token": "spark-llm:hfToken (a secret)",
        "--config": "spark-llm:engine.flags (flags in a file would escape this check)",
    },
}

# The same setting in the other engine: named when one engine's flag is given to the other.
_COUNTERPARTS = {
    "--context-length": "--max-model-len",
    "--mem-fraction-static": "--gpu-memory-utilization",
    "--max-running-requests": "--max-num-seqs",
}
_COUNTERPARTS |= {vllm: sglang for sglang, vllm in _COUNTERPARTS.items()}


@dataclass(frozen=True)
class NumericRange:
    """The values an engine takes for a numeric flag: `low`..`high`, each end open or closed; `what` the value is
    and `refusal`, what the engine does with any other value (both shown in the refusal)."""

    low: float
    low_closed: bool
    high: float
    high_closed: bool
    what: str
    refusal: str

    def holds(self, value: float) -> bool:
        # Written so that NaN (which float() takes) is outside every range.
        above = value >= self.low if self.low_closed else value > self.low
        below = value <= self.high if self.high_closed else value < self.high
        return above and below

    def words(self) -> str:
        low = f"at least {self.low:g}" if self.low_closed else f"greater than {self.low:g}"
        high = f"at most {self.high:g}" if self.high_closed else f"less than {self.high:g}"
        return f"{low} and {high}"


# vLLM's config dataclasses bound these with pydantic Field(gt/ge/lt/le): the parser takes any float, and vLLM
# refuses the value only when it builds its config, after the containers started on every node.
_VLLM_REFUSES = "vLLM refuses any other value when it builds its config, after every container started"

# (engine, canonical flag) -> the range the engine enforces, in every catalogued release that has the flag.
NUMERIC_RANGES: dict[tuple[str, str], NumericRange] = {
    # vllm/config/cache.py CacheConfig.gpu_memory_utilization: Field(gt=0, le=1)
    ("vllm", "--gpu-memory-utilization"): NumericRange(
        0, False, 1, True, "the fraction of the GPU's memory vLLM may use", _VLLM_REFUSES
    ),
    # vllm/config/observability.py ObservabilityConfig.kv_cache_metrics_sample: Field(gt=0, le=1)
    ("vllm", "--kv-cache-metrics-sample"): NumericRange(
        0, False, 1, True, "the fraction of KV cache blocks sampled for metrics", _VLLM_REFUSES
    ),
    # vllm/config/multimodal.py MultiModalConfig.video_pruning_rate: Field(ge=0.0, lt=1.0)
    ("vllm", "--video-pruning-rate"): NumericRange(
        0, True, 1, False, "the fraction of video tokens pruned", _VLLM_REFUSES
    ),
    # SGLang's parser and ServerArgs check no range: mem_fraction_static is the share of the GPU's memory for the
    # weights and the KV cache pool (sglang/srt/arg_groups/memory_hook.py), so above 1 the pool asks for more
    # memory than the GPU has, and at 0 or below there is no room for the KV cache.
    ("sglang", "--mem-fraction-static"): NumericRange(
        0,
        False,
        1,
        True,
        "the fraction of the GPU's memory SGLang takes for the weights and the KV cache",
        "any other value asks for more memory than the GPU has, or leaves none for the KV cache: "
        "the launch fails after loading the weights",
    ),
}

# Flags whose catalog metavar lists values a plugin can add to (vLLM: `TokenizerMode | str`, "other custom values
# can be supported via plugins"; config formats come from a registry of config parsers): their metavar suggests,
# it does not refuse.
_OPEN_METAVARS = {("vllm", "--tokenizer-mode"), ("vllm", "--config-format")}

# Dashes a word processor or a web page puts where `--` was typed: en dash, em dash, minus sign.
_TYPOGRAPHIC_DASHES = "\u2013\u2014\u2212"
# argparse's own test: a token like this is a value (a negative number), not an option.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# vLLM's human_readable_int (SGLang's int_human_readable follows it): 25.6k = 25600, 1K = 1024.
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_JSON_OBJECT = re.compile(r"(?s)^\s*{.*}\s*$")

_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "json": "JSON",
    "json_list": "a JSON list",
    "json_or_str": "text, or JSON when it starts with '{'",
    "int_human_readable": "an integer, optionally with a k/m/g/t (x1000) or K/M/G/T (x1024) suffix",
    "int_human_readable_or_auto": "'auto' or an integer, optionally with a k/m/g/t or K/M/G/T suffix",
    "list_int_or_str_comma_separated": "comma-separated integers or names",
    "bool": "true",
    "str": "text",
}
_TYPE_EXAMPLES = {
    "int": "8",
    "float": "0.8",
    "json": "{}",
    "json_list": "[]",
    "json_or_str": "{}",
    "int_human_readable": "32k",
    "int_human_readable_or_auto": "auto",
    "list_int_or_str_comma_separated": "0,1",
    "bool": "true",
    "str": "VALUE",
}


class UnknownCatalogError(ValueError):
    """No catalog for this engine or release; the message lists the known ones."""


@dataclass(frozen=True)
class FlagProblem:
    """One flag the engine (or the program) would refuse: the flag as written (no value), why, and a fix.

    kind: unknown, other-engine, other-version, underscore, prefix, ambiguous-prefix, negation, missing-value,
    switch-value, stray-value, empty, dash, joined, type, range, choice, owned, deprecated (refused, or, among
    `flag_warnings`, taken with a warning).
    """

    flag: str
    kind: str
    message: str


@dataclass(frozen=True)
class FlagSpec:
    """One argparse action of an engine release, as its catalog entry describes it."""

    flag: str
    aliases: tuple[str, ...]
    negations: tuple[str, ...]
    takes_value: bool
    type: str
    choices: tuple[str, ...] | None
    nargs: str | None
    nullable: bool
    default: Any
    deprecated: bool

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any], engine: str = "") -> FlagSpec:
        choices = entry.get("choices")
        metavar = entry.get("metavar")
        if not choices and isinstance(metavar, list) and (engine, entry["flag"]) not in _OPEN_METAVARS:
            # The catalog keeps a Literal's values in the metavar when the parser itself does not check them
            # (vLLM 0.33's --kv-cache-dtype): the engine's config still refuses any other value at start.
            choices = metavar
        return cls(
            flag=entry["flag"],
            aliases=tuple(entry.get("aliases", ())),
            negations=tuple(entry.get("negations", ())),
            takes_value=bool(entry["takes_value"]),
            type=entry.get("type", "str"),
            choices=tuple(str(c) for c in choices) if choices else None,
            nargs=entry.get("nargs"),
            nullable=bool(entry.get("nullable", False)),
            default=entry.get("default"),
            deprecated=bool(entry.get("deprecated", False)),
        )

    @property
    def refused_when_given(self) -> bool:
        # SGLang's DeprecatedAction takes no value and raises ValueError when given: the catalog shows it as a
        # deprecated switch that is not a bool. Other deprecated flags (vLLM's, SGLang's bool ones) only warn.
        return self.deprecated and not self.takes_value and self.type != "bool"


class Catalog:
    """Every option string one engine release accepts, and what each one means."""

    def __init__(self, engine: str, version: str, data: Mapping[str, Any]) -> None:
        self.engine = engine
        self.version = version
        self.name = f"{ENGINE_NAMES[engine]} {version}"
        self.path = f"spark_llm/config/{CATALOG_DIR}/{engine}-{version}.json"
        self.flags = tuple(FlagSpec.from_entry(e, engine) for e in data["flags"])
        self._options: dict[str, tuple[FlagSpec, bool]] = {}  # option string -> (spec, negates)
        for spec in self.flags:
            for option in (spec.flag, *spec.aliases):
                self._options[option] = (spec, False)
            for option in spec.negations:
                self._options[option] = (spec, True)
        self.option_strings = tuple(sorted(data["all_option_strings"]))

    def lookup(self, option: str) -> tuple[FlagSpec, bool] | None:
        """(spec, negates) for an exact option string."""
        return self._options.get(option)

    def abbreviated(self, prefix: str) -> list[str]:
        """The option strings argparse would take `prefix` for (allow_abbrev), when it is not one itself."""
        return [o for o in self.option_strings if o.startswith(prefix) and o != prefix and o in self._options]

    def expand(self, prefix: str) -> tuple[FlagSpec, bool, str] | None:
        """The one flag `prefix` abbreviates, as (spec, negates, full spelling); None when none or several."""
        found = [(*self._options[o], o) for o in self.abbreviated(prefix)]
        return found[0] if found and len({spec.flag for spec, _, _ in found}) == 1 else None

    def normalize(self, option: str) -> str:
        """The option string the parser looks up: vLLM turns `_` into `-` (before any `.`), SGLang does not."""
        if self.engine == "vllm" and option.startswith("--"):
            head, dot, tail = option[2:].partition(".")
            return "--" + head.replace("_", "-") + dot + tail
        return option

    def accepting(self, option: str) -> list[str]:
        """The other catalogued releases of this engine whose parser has exactly `option`."""
        return [
            v
            for v in known_versions(self.engine)
            if v != self.version and load_catalog(self.engine, v).lookup(option) is not None
        ]


# ---------- the packaged catalogs ----------


@cache
def _index() -> dict[str, tuple[str, ...]]:
    found: dict[str, list[str]] = {}
    for entry in resources.files("spark_llm.config").joinpath(CATALOG_DIR).iterdir():
        match = _CATALOG_FILE.match(entry.name)
        if match and match["engine"] in ENGINE_NAMES:
            found.setdefault(match["engine"], []).append(match["version"])
    return {engine: tuple(sorted(versions, key=_version_key)) for engine, versions in sorted(found.items())}


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _require_engine(engine: str) -> None:
    if engine not in _index():
        raise UnknownCatalogError(f"no flag catalogs for engine {engine!r}; known engines: {', '.join(_index())}")


def known_versions(engine: str) -> tuple[str, ...]:
    """The releases of `engine` that have a catalog, oldest first."""
    _require_engine(engine)
    return _index()[engine]


def newest_version(engine: str) -> str:
    """The newest catalogued release of `engine` (the default of `spark-llm:engine.version`)."""
    return known_versions(engine)[-1]


@cache
def load_catalog(engine: str, version: str) -> Catalog:
    """The catalog of exactly this release; an unknown engine or release raises UnknownCatalogError."""
    if version not in known_versions(engine):
        name = ENGINE_NAMES[engine]
        raise UnknownCatalogError(
            f"no flag catalog for {name} {version!r}; known {name} versions: {', '.join(known_versions(engine))}"
        )
    text = resources.files("spark_llm.config").joinpath(CATALOG_DIR, f"{engine}-{version}.json").read_text()
    return Catalog(engine, version, json.loads(text))


# ---------- values ----------


def _human_int(value: str) -> bool | str:
    text = value.strip()
    match = _HUMAN_INT.fullmatch(text)
    if match:
        if match[2].isupper() and "." in match[1]:
            return f"no decimals with the binary suffix {match[2]}; {match[1]}{match[2].lower()} is decimal"
        return True
    try:
        int(text)
    except ValueError:
        return False
    return True


def _valid(kind: str, value: str) -> bool | str:
    """True when the engine's parser takes `value` for a flag of this type; False, or why not, otherwise."""
    try:
        if kind == "int":
            int(value)
        elif kind == "float":
            float(value)
        elif kind == "json":
            json.loads(value)
        elif kind == "json_list":
            return isinstance(json.loads(value), list) or "not a list"
        elif kind == "json_or_str":
            if _JSON_OBJECT.match(value):  # vLLM parses what looks like an object as JSON, anything else as text
                json.loads(value)
        elif kind == "int_human_readable":
            return _human_int(value)
        elif kind == "int_human_readable_or_auto":
            return value.strip().lower() in ("auto", "-1") or _human_int(value)
        elif kind == "list_int_or_str_comma_separated":
            return all(part.strip() for part in value.split(","))
        elif kind == "bool" and value.strip().lower() in ("", "false", "0", "no", "off"):
            # argparse's type=bool: bool("false") is True, any non-empty text turns the flag on.
            return f"the engine reads it with bool(), so {value!r} turns the flag on too: leave the flag out"
    except ValueError:
        return False
    return True


def _example(spec: FlagSpec) -> str:
    """A value the flag takes: its first choice, its default, or one of its type."""
    if spec.choices:
        return spec.choices[0]
    default = spec.default
    if default is not None and not isinstance(default, bool) and spec.type != "bool":
        text = json.dumps(default) if isinstance(default, dict | list) else str(default)
        if text and _valid(spec.type, text) is True:
            return text
    return _TYPE_EXAMPLES.get(spec.type, "VALUE")


# ---------- reading the tokens the way argparse does ----------


def _is_option(token: str) -> bool:
    """Whether argparse reads `token` as an option rather than as a value."""
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER.match(token) and " " not in token


def _ascii_dashes(token: str) -> str:
    """`token` with leading typographic dashes (`—x`, `–x`) written as the `--` they stand for."""
    rest = token.lstrip(_TYPOGRAPHIC_DASHES)
    return "--" + rest.lstrip("-") if rest != token and rest.strip("-") else token


def printable(text: str) -> str:
    """`text` with control characters escaped (`\\n`), so that each refusal stays one line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _code(text: str) -> str:
    return f"`{printable(text)}`"


def _usage(flag: str, value: str) -> str:
    """`--flag value` as a shell would need it written."""
    return _code(f"{flag} {shlex.quote(value)}")


def _listing(items: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(_code(i) for i in items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


@dataclass(frozen=True)
class _Meaning:
    """What an option token means to one release's parser; `problem` when its spelling is refused."""

    spec: FlagSpec | None
    negates: bool = False
    dotted: bool = False
    problem: FlagProblem | None = None


class _FlagReader:
    """Walks a token list as the engine's argparse would, collecting FlagProblems."""

    def __init__(self, catalog: Catalog, owned: Mapping[str, str]) -> None:
        self.cat = catalog
        self.warnings: list[FlagProblem] = []  # flags taken, but deprecated in this release
        self.owned_spellings = {catalog.normalize(k): v for k, v in owned.items()}
        self.owned_flags: dict[str, str] = {}  # canonical flag -> config key, so aliases and prefixes count
        for spelling, key in self.owned_spellings.items():
            found = catalog.lookup(spelling) or catalog.expand(spelling)
            if found is not None:
                self.owned_flags.setdefault(found[0].flag, key)

    def read(self, flags: Sequence[str]) -> list[FlagProblem]:
        problems: list[FlagProblem] = []
        i = 0
        while i < len(flags):
            token = flags[i]
            i += 1
            if token == "--":
                problems.append(self._stray(token, "`--` ends the options; what follows would be positional"))
                break
            if not _is_option(token):
                problems.append(self._not_an_option(token))
                fixed = _ascii_dashes(token)
                if fixed != token and _is_option(fixed):
                    # Take the value the flag it was meant to be takes, so it is not reported a second time.
                    name, explicit = self._split(fixed)
                    after, value_problem = self._values(flags, i, name, self.meaning(name), explicit)
                    i = after if value_problem is None else i
                continue
            name, explicit = self._split(token)
            meaning = self.meaning(name)
            problem = self._owned(name, meaning) or meaning.problem
            if problem is None and meaning.spec is not None and meaning.spec.refused_when_given:
                problem = FlagProblem(
                    name,
                    "deprecated",
                    f"{_code(name)} is deprecated in {self.cat.name} and stops the launch: remove it",
                )
            if problem is not None:
                problems.append(problem)
            i, value_problem = self._values(flags, i, name, meaning, explicit)
            if problem is None and value_problem is not None:
                problems.append(value_problem)
            if problem is None and value_problem is None and meaning.spec is not None and meaning.spec.deprecated:
                self.warnings.append(self._deprecated(name, meaning.spec))
        return problems

    def _not_an_option(self, token: str) -> FlagProblem:
        """A token argparse reads as a positional value: the slips that make one, named with their fix."""
        cat = self.cat
        if not token.strip():
            why = f"an empty item ({_code(token)}) in spark-llm:engine.flags: {cat.name} refuses it; remove it"
            return FlagProblem(token, "empty", why)
        # The value is never echoed (it may be a secret, `--api-key=sk-...`): only the flag part.
        words = token.split(None, 1)
        name = words[0].partition("=")[0] if words else token
        fixed = _ascii_dashes(name)
        if fixed != name:
            why = f"{_code(name)} starts with a typographic dash, not `--` (pasted from a page?): write {_code(fixed)}"
            return FlagProblem(name, "dash", f"{why}; {cat.name} takes only ASCII dashes")
        if name.startswith("-") and " " in token.strip():
            why = (
                f"{_code(name)} and its value are one item: {cat.name} would read them as one word; "
                f"write two items, {_code(name)} then the value"
            )
            return FlagProblem(name, "joined", why)
        return self._stray(token, f"{_code(token)} is not a flag and follows none that takes a value")

    def _deprecated(self, name: str, spec: FlagSpec) -> FlagProblem:
        """The warning for a flag this release takes but marks deprecated, with the release that drops it."""
        cat = self.cat
        newer = [v for v in known_versions(cat.engine) if _version_key(v) > _version_key(cat.version)]
        gone = [v for v in newer if load_catalog(cat.engine, v).lookup(spec.flag) is None]
        if gone:
            future = f"{ENGINE_NAMES[cat.engine]} {gone[0]} no longer has it"
        else:
            future = "a later release may refuse it"
        why = f"{_code(name)} is deprecated in {cat.name}: it still works, but {future}; plan to remove it"
        return FlagProblem(name, "deprecated", why)

    def _split(self, token: str) -> tuple[str, str | None]:
        """The option part of `token` and its attached value: `--x=1`, argparse's `-qfp8`, vLLM's `-O3`."""
        name, eq, attached = token.partition("=")
        if eq:
            return name, attached
        if not token.startswith("--") and len(token) > 2 and self.cat.lookup(token) is None:
            if self.cat.lookup(token[:2]) is not None or (self.cat.engine == "vllm" and token.startswith("-O")):
                return token[:2], token[2:]
        return token, None

    def _stray(self, token: str, what: str) -> FlagProblem:
        return FlagProblem(token, "stray-value", f"{what}: {self.cat.name} refuses it ('unrecognized arguments')")

    def _owned(self, name: str, meaning: _Meaning) -> FlagProblem | None:
        key = self.owned_spellings.get(self.cat.normalize(name))
        if key is None and meaning.spec is not None:
            key = self.owned_flags.get(meaning.spec.flag)
        if key is None:
            return None
        if meaning.problem is not None and meaning.problem.kind == "underscore":
            # SGLang refuses `--tensor_parallel_size` for its spelling ("unrecognized arguments"): say that first,
            # then that the flag it was meant to be is spark-llm's.
            dashed = "--" + name[2:].replace("_", "-")
            why = (
                f"{_code(name)}: {self.cat.name} does not turn `_` into `-` in flag names (vLLM does), so it has no "
                f"such flag; its spelling is {_code(dashed)}, and spark-llm sets that one itself: use {key} instead "
                "(remove it from spark-llm:engine.flags)"
            )
            return FlagProblem(name, "underscore", why)
        return FlagProblem(
            name,
            "owned",
            f"{_code(name)} is set by spark-llm for {self.cat.name}: use {key} instead "
            "(remove it from spark-llm:engine.flags)",
        )

    # ---- spelling ----

    def meaning(self, name: str) -> _Meaning:
        """What `name` (the token without an attached value) means to this release's parser."""
        cat = self.cat
        option = cat.normalize(name)
        found = cat.lookup(option)
        if found is not None:
            return _Meaning(*found)
        level = cat.lookup("--optimization-level") if cat.engine == "vllm" and option == "-O" else None
        if level is not None:
            # vLLM 0.16+ rewrites -O<n> / -O <n> to --optimization-level before argparse runs.
            return _Meaning(*level)
        if cat.engine == "vllm" and option.startswith("--") and "." in option:
            return self._dotted(name, option)
        if cat.engine == "sglang" and option.startswith("--") and "_" in option:
            dashed = "--" + option[2:].replace("_", "-")
            found = cat.lookup(dashed)
            if found is not None:
                why = (
                    f"{_code(name)}: {cat.name} does not turn `_` into `-` in flag names (vLLM does), so it has "
                    f"no such flag; write {_code(dashed)}"
                )
                return _Meaning(*found, problem=FlagProblem(name, "underscore", why))
        expanded = cat.expand(option)
        if expanded is not None:
            spec, negates, full = expanded
            why = (
                f"{_code(name)} abbreviates {_code(full)}: {cat.name} takes it, but write {_code(full)} in full "
                "(an abbreviation can turn ambiguous in the next release)"
            )
            return _Meaning(spec, negates, problem=FlagProblem(name, "prefix", why))
        candidates = cat.abbreviated(option)
        if candidates:
            elsewhere = cat.accepting(option)
            itself = (
                f" ({_code(option)} itself is in {ENGINE_NAMES[cat.engine]} {', '.join(elsewhere)})"
                if elsewhere
                else ""
            )
            why = (
                f"{_code(name)} is ambiguous in {cat.name}: it could be {_listing(candidates)}; "
                f"write one in full{itself}"
            )
            return _Meaning(None, problem=FlagProblem(name, "ambiguous-prefix", why))
        return _Meaning(None, problem=self._not_a_flag(name, option))

    def _dotted(self, name: str, option: str) -> _Meaning:
        """vLLM: `--compilation-config.mode 3` sets one key of a JSON flag."""
        base = self.meaning(option.split(".", 1)[0])
        if base.spec is not None and base.problem is None and base.spec.type not in ("json", "json_or_str"):
            takes = _TYPE_WORDS.get(base.spec.type, base.spec.type)
            why = (
                f"{_code(name)}: {self.cat.name} takes dotted keys on JSON flags only "
                f"(e.g. `--compilation-config.mode 3`); {_code(base.spec.flag)} takes {takes}"
            )
            return _Meaning(base.spec, dotted=True, problem=FlagProblem(name, "type", why))
        return _Meaning(base.spec, dotted=True, problem=base.problem)

    def _not_a_flag(self, name: str, option: str) -> FlagProblem:
        """Why this release has no `option`: another release has it, the other engine has it, or a near miss."""
        cat = self.cat
        engine = ENGINE_NAMES[cat.engine]
        dashed = "--" + option[2:].replace("_", "-") if option.startswith("--") else option
        other = next(e for e in ENGINE_NAMES if e != cat.engine)
        in_other = [v for v in known_versions(other) if (c := load_catalog(other, v)).lookup(c.normalize(dashed))]
        other_flag = f"a {ENGINE_NAMES[other]} flag ({ENGINE_NAMES[other]} {', '.join(in_other)})"
        accepting = cat.accepting(option)
        if accepting:
            here = _version_key(cat.version)
            newer = [v for v in accepting if _version_key(v) > here]
            older = [v for v in accepting if _version_key(v) < here]
            if not older:
                when = f"added after {cat.version} (accepted by {engine} {', '.join(newer)})"
            elif not newer:
                when = f"removed after {older[-1]} (accepted by {engine} {', '.join(older)})"
            else:
                when = f"accepted by {engine} {', '.join(accepting)}, not by {cat.version}"
            also = f"; it is also {other_flag}" if in_other else ""
            return FlagProblem(name, "other-version", f"{_code(name)} is not a {cat.name} flag: {when}{also}")
        negation = self._missing_negation(name, option)
        if negation is not None:
            also = f"; {_code(name)} is {other_flag}" if in_other else ""
            return FlagProblem(name, "negation", negation + also)
        if in_other:
            counterpart = _COUNTERPARTS.get(dashed)
            if counterpart and cat.lookup(counterpart):
                hint = f"; the nearest {engine} flag is {_code(counterpart)}"
            else:
                hint = self._near_misses(dashed)
            return FlagProblem(
                name, "other-engine", f"{_code(name)} is {other_flag}; {cat.name} has no such flag{hint}"
            )
        return FlagProblem(name, "unknown", f"{_code(name)} is not a {cat.name} flag{self._near_misses(dashed)}")

    def _missing_negation(self, name: str, option: str) -> str | None:
        """Why `--no-X` (or vLLM's `--disable-X`) is refused when X is a switch without that negation here."""
        if option.startswith("--no-"):
            positive = "--" + option.removeprefix("--no-")
        elif option.startswith("--disable-"):
            positive = "--enable-" + option.removeprefix("--disable-")
        else:
            return None
        found = self.cat.lookup(positive)
        if found is None or found[0].takes_value:
            return None
        spec = found[0]
        if spec.negations:
            fix = f"its negation is {_listing(spec.negations)}"
        elif not spec.default:
            fix = "it is off unless given: leave it out"
        else:
            fix = "this release cannot turn it off from the command line"
        return f"{_code(name)}: {self.cat.name} has no such negation of the switch {_code(spec.flag)}; {fix}"

    def _near_misses(self, option: str) -> str:
        if not option.startswith("--"):
            # argparse splits `-qfp8` only after a one-letter option: `-tp2` is not `-tp 2`.
            shorts = [o for o in self.cat.option_strings if not o.startswith("--") and option.startswith(o)]
            if shorts:
                short = max(shorts, key=len)
                return f"; write the value apart: {_usage(short, option[len(short) :])}"
        longs = [o for o in self.cat.option_strings if o.startswith("--")]
        close = difflib.get_close_matches(option, longs, n=3, cutoff=0.75)
        if close:
            return f"; did you mean {' or '.join(_code(c) for c in close)}?"
        return f"; nothing spelled like it (every flag: {self.cat.path})"

    # ---- values ----

    def _spec_anywhere(self, name: str) -> FlagSpec | None:
        """The flag in any catalog, newest first: only to know whether a value follows an unknown flag."""
        for engine in ENGINE_NAMES:
            for version in reversed(known_versions(engine)):
                other = load_catalog(engine, version)
                found = other.lookup(other.normalize(name))
                if found is not None:
                    return found[0]
        return None

    def _values(
        self, flags: Sequence[str], i: int, name: str, meaning: _Meaning, explicit: str | None
    ) -> tuple[int, FlagProblem | None]:
        """Consume the flag's values as argparse would: (index after them, the first problem with them)."""
        cat = self.cat
        follows = i < len(flags) and not _is_option(flags[i])
        spec = meaning.spec or self._spec_anywhere(name)
        if spec is None:
            # Not a flag anywhere: take a following non-option as its value, so one mistake is reported once.
            return (i + 1 if explicit is None and follows else i), None
        if meaning.dotted:
            if explicit is not None:
                return i, None
            if i < len(flags):
                return i + 1, None
            return i, FlagProblem(name, "missing-value", f"{_code(name)} needs a value in {cat.name}, e.g. `{name} 3`")
        if meaning.negates or not spec.takes_value:
            # An empty item after a switch is its own mistake (reported as such), not the switch's value.
            given = explicit if explicit is not None else (flags[i] if follows and flags[i].strip() else None)
            if given is None:
                return i, None
            turn_off = (
                f", or {_code(spec.negations[0])} to turn it off" if spec.negations and not meaning.negates else ""
            )
            why = (
                f"{_code(name)} is a switch in {cat.name} and takes no value (got {_code(given)}): "
                f"write {_code(name)} alone{turn_off}"
            )
            return (i + 1 if explicit is None else i), FlagProblem(name, "switch-value", why)
        values: list[str] = []
        if explicit is not None:
            values = [explicit]
        elif spec.nargs in ("+", "*"):
            while i < len(flags) and not _is_option(flags[i]):
                values.append(flags[i])
                i += 1
        elif follows:
            values = [flags[i]]
            i += 1
        if not values:
            if spec.nargs in ("?", "*"):
                return i, None
            why = (
                f"{_code(name)} needs a value ({_TYPE_WORDS.get(spec.type, spec.type)}) in {cat.name}, "
                f"e.g. {_usage(spec.flag, _example(spec))}"
            )
            return i, FlagProblem(name, "missing-value", why)
        for value in values:
            problem = self._value_problem(name, spec, value)
            if problem is not None:
                return i, problem
        return i, None

    def _value_problem(self, name: str, spec: FlagSpec, value: str) -> FlagProblem | None:
        cat = self.cat
        if spec.nullable and value == "None":
            return None
        valid = _valid(spec.type, value)
        if valid is not True and spec.type == "bool":
            return FlagProblem(name, "type", f"{_usage(name, value)}: in {cat.name} {valid}")
        if valid is not True:
            why = f" ({valid})" if isinstance(valid, str) else ""
            return FlagProblem(
                name,
                "type",
                f"{_usage(name, value)}: {cat.name} wants {_TYPE_WORDS.get(spec.type, spec.type)}{why}, "
                f"e.g. {_usage(spec.flag, _example(spec))}",
            )
        bounds = NUMERIC_RANGES.get((cat.engine, spec.flag))
        if bounds is not None and not bounds.holds(float(value)):
            example = _example(spec)
            if not bounds.holds(float(example)):
                example = "0.8"
            why = (
                f"{_usage(name, value)}: out of range for {cat.name}: {bounds.what} is {bounds.words()} "
                f"({bounds.refusal}); e.g. {_usage(spec.flag, example)}"
            )
            return FlagProblem(name, "range", why)
        if spec.choices:
            given = str(int(value)) if spec.type == "int" else value
            if given not in spec.choices:
                # A cut-short choice (`bfloat`) means the one it starts, before any spelling alike (`float`).
                started = [c for c in spec.choices if c.startswith(given)] if given else []
                close = (
                    started if len(started) == 1 else difflib.get_close_matches(given, spec.choices, n=1, cutoff=0.6)
                )
                hint = f"; did you mean {_code(close[0])}?" if close else ""
                why = f"{_usage(name, value)}: not a choice of {cat.name}; one of {_listing(spec.choices)}{hint}"
                return FlagProblem(name, "choice", why)
        return None


def check_flags(engine: str, version: str, flags: Sequence[str], owned: Mapping[str, str]) -> list[FlagProblem]:
    """Every problem with `flags` (the tokens as appended to the engine's command line) for this release.

    `owned` maps the flags the program sets itself to the config key to use instead; their aliases and
    abbreviations count too. An empty list means the release's parser takes every token, each spelled in full.
    An unknown engine or release raises UnknownCatalogError listing the known ones.
    """
    return _FlagReader(load_catalog(engine, version), owned).read(flags)


def flag_warnings(engine: str, version: str, flags: Sequence[str]) -> list[FlagProblem]:
    """The flags this release takes but its catalog marks deprecated (kind `deprecated`), in order.

    Only flags `check_flags` accepts as given: a refused flag is reported there instead.
    """
    reader = _FlagReader(load_catalog(engine, version), OWNED_FLAGS[engine])
    reader.read(flags)
    return reader.warnings
