"""The engines' flag catalogs as data: every option string one release of SGLang or vLLM parses (names, aliases,
negations, value types, choices), the ranges the engines enforce later, and the packaged catalogs
(`spark_llm/config/engine_catalogs/`, provenance in its README).

Pure: no Pulumi, no I/O except reading the packaged catalogs. spark_llm.config.engine_flags reads flags with them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
CATALOG_DIR = "engine_catalogs"
_CATALOG_FILE = re.compile(r"^(?P<engine>[a-z]+)-(?P<version>\d+(?:\.\d+)+)\.json$")


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
    return {engine: tuple(sorted(versions, key=version_key)) for engine, versions in sorted(found.items())}


def version_key(version: str) -> tuple[int, ...]:
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
