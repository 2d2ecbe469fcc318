"""The real engines' flag catalogs, one per engine version: the program's own copy
(spark_llm/config/engine_catalogs, see its README.md), which build-image.sh puts beside this module
in the image (catalogs/)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

# In the image: catalogs/ beside this module. From a checkout (unit tests run this code in place): the package's.
_IN_IMAGE = Path(__file__).resolve().parent / "catalogs"
CATALOG_DIR = (
    _IN_IMAGE
    if _IN_IMAGE.is_dir()
    else Path(__file__).resolve().parents[3] / "spark_llm" / "config" / "engine_catalogs"
)
ENGINE_VERSION_ENV = "SPARK_LLM_ENGINE_VERSION"
ENGINES = ("sglang", "vllm")

_CATALOG_NAME = re.compile(r"^(?P<engine>[a-z]+)-(?P<version>\d+(?:\.\d+)*)\.json$")


class CatalogError(ValueError):
    """No catalog for the engine or version asked for; the message lists the known ones."""


@dataclass(frozen=True, kw_only=True)
class CatalogFlag:
    """One argparse action of a real engine, as its catalog records it."""

    flag: str
    """First long option string, as declared; the argparse dest is derived from it."""
    aliases: tuple[str, ...]
    negations: tuple[str, ...]
    """Spellings that set a bool to false (`--no-X`, in vLLM 0.33 also `--disable-X`)."""
    takes_value: bool
    type: str
    """One of the catalog's type names: str, int, float, bool, json, json_or_str, json_list, int_human_readable..."""
    choices: tuple[str, ...] | None
    nargs: str | None
    default: object
    required: bool
    nullable: bool
    """The string `None` is accepted as null (vLLM's optional types)."""
    deprecated: bool
    hidden_from_help: bool

    @property
    def option_strings(self) -> tuple[str, ...]:
        """Every spelling argparse registers for this action: the flag, its aliases, then its negations."""
        return (self.flag, *self.aliases, *self.negations)

    @property
    def dest(self) -> str:
        """The argparse dest: the first long option string without dashes, `-` as `_`."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True, kw_only=True, eq=False)
class EngineCatalog:
    """Every flag one engine version accepts, in the order its parser registers them."""

    engine: str
    version: str
    release_tag: str
    positionals: tuple[str, ...]
    flags: tuple[CatalogFlag, ...]
    all_option_strings: frozenset[str]
    _by_option_string: dict[str, CatalogFlag] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        index = {name: flag for flag in self.flags for name in flag.option_strings}
        object.__setattr__(self, "_by_option_string", index)

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return version_key(self.version)

    def flag_named(self, option_string: str) -> CatalogFlag | None:
        """The flag registered under this exact spelling (flag, alias or negation), or None."""
        return self._by_option_string.get(option_string)

    def has_option(self, option_string: str) -> bool:
        return option_string in self.all_option_strings


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def available_versions(engine: str) -> tuple[str, ...]:
    """The catalog versions of one engine, oldest first."""
    versions = []
    for path in CATALOG_DIR.glob("*.json"):
        match = _CATALOG_NAME.match(path.name)
        if match and match["engine"] == engine:
            versions.append(match["version"])
    return tuple(sorted(versions, key=version_key))


def selected_version(engine: str, environ: Mapping[str, str]) -> str:
    """The version chosen by SPARK_LLM_ENGINE_VERSION, else the newest catalog of the engine."""
    if engine not in ENGINES:
        raise CatalogError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    versions = available_versions(engine)
    if not versions:
        raise CatalogError(f"no flag catalog for {engine} in {CATALOG_DIR}")
    wanted = environ.get(ENGINE_VERSION_ENV, "").strip().removeprefix("v")
    if not wanted:
        return versions[-1]
    if wanted not in versions:
        raise CatalogError(
            f"{ENGINE_VERSION_ENV}={wanted!r}: the stand-in has no {engine} flag catalog for that version; "
            f"known {engine} versions: {', '.join(versions)}"
        )
    return wanted


@cache
def load_catalog(engine: str, version: str) -> EngineCatalog:
    """Read catalogs/<engine>-<version>.json; raise CatalogError when there is none."""
    path = CATALOG_DIR / f"{engine}-{version}.json"
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        known = ", ".join(available_versions(engine)) or "none"
        raise CatalogError(f"no flag catalog {path.name}; known {engine} versions: {known}") from None
    flags = tuple(
        CatalogFlag(
            flag=entry["flag"],
            aliases=tuple(entry["aliases"]),
            negations=tuple(entry["negations"]),
            takes_value=bool(entry["takes_value"]),
            type=entry["type"],
            choices=tuple(str(choice) for choice in entry["choices"]) if entry["choices"] is not None else None,
            nargs=entry.get("nargs"),
            default=entry.get("default"),
            required=bool(entry.get("required", False)),
            nullable=bool(entry.get("nullable", False)),
            deprecated=bool(entry.get("deprecated", False)),
            hidden_from_help=bool(entry.get("hidden_from_help", False)),
        )
        for entry in raw["flags"]
    )
    return EngineCatalog(
        engine=raw["engine"],
        version=raw["version"],
        release_tag=raw["release_tag"],
        positionals=tuple(positional["name"] for positional in raw["positionals"]),
        flags=flags,
        all_option_strings=frozenset(raw["all_option_strings"]),
    )
