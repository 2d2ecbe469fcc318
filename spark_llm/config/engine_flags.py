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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spark_llm.config.engine_catalog import (
    ENGINE_NAMES,
    Catalog,
    FlagProblem,
    FlagSpec,
    UnknownCatalogError,
    known_versions,
    load_catalog,
    newest_version,
    version_key,
)
from spark_llm.config.flag_hints import not_a_flag
from spark_llm.config.flag_values import (
    TYPE_WORDS,
    ascii_dashes,
    code,
    example_value,
    is_option,
    listing,
    printable,
    usage,
    value_problem,
)

__all__ = [
    "ENGINE_NAMES",
    "OWNED_FLAGS",
    "FlagProblem",
    "UnknownCatalogError",
    "check_flags",
    "flag_warnings",
    "known_versions",
    "load_catalog",
    "newest_version",
    "printable",
]

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
            if not is_option(token):
                problems.append(self._not_an_option(token))
                fixed = ascii_dashes(token)
                if fixed != token and is_option(fixed):
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
                    f"{code(name)} is deprecated in {self.cat.name} and stops the launch: remove it",
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
            why = f"an empty item ({code(token)}) in spark-llm:engine.flags: {cat.name} refuses it; remove it"
            return FlagProblem(token, "empty", why)
        # The value is never echoed (it may be a secret, `--api-key=sk-...`): only the flag part.
        words = token.split(None, 1)
        name = words[0].partition("=")[0] if words else token
        fixed = ascii_dashes(name)
        if fixed != name:
            why = f"{code(name)} starts with a typographic dash, not `--` (pasted from a page?): write {code(fixed)}"
            return FlagProblem(name, "dash", f"{why}; {cat.name} takes only ASCII dashes")
        if name.startswith("-") and " " in token.strip():
            why = (
                f"{code(name)} and its value are one item: {cat.name} would read them as one word; "
                f"write two items, {code(name)} then the value"
            )
            return FlagProblem(name, "joined", why)
        return self._stray(token, f"{code(token)} is not a flag and follows none that takes a value")

    def _deprecated(self, name: str, spec: FlagSpec) -> FlagProblem:
        """The warning for a flag this release takes but marks deprecated, with the release that drops it."""
        cat = self.cat
        newer = [v for v in known_versions(cat.engine) if version_key(v) > version_key(cat.version)]
        gone = [v for v in newer if load_catalog(cat.engine, v).lookup(spec.flag) is None]
        if gone:
            future = f"{ENGINE_NAMES[cat.engine]} {gone[0]} no longer has it"
        else:
            future = "a later release may refuse it"
        why = f"{code(name)} is deprecated in {cat.name}: it still works, but {future}; plan to remove it"
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
                f"{code(name)}: {self.cat.name} does not turn `_` into `-` in flag names (vLLM does), so it has no "
                f"such flag; its spelling is {code(dashed)}, and spark-llm sets that one itself: use {key} instead "
                "(remove it from spark-llm:engine.flags)"
            )
            return FlagProblem(name, "underscore", why)
        return FlagProblem(
            name,
            "owned",
            f"{code(name)} is set by spark-llm for {self.cat.name}: use {key} instead "
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
                    f"{code(name)}: {cat.name} does not turn `_` into `-` in flag names (vLLM does), so it has "
                    f"no such flag; write {code(dashed)}"
                )
                return _Meaning(*found, problem=FlagProblem(name, "underscore", why))
        expanded = cat.expand(option)
        if expanded is not None:
            spec, negates, full = expanded
            why = (
                f"{code(name)} abbreviates {code(full)}: {cat.name} takes it, but write {code(full)} in full "
                "(an abbreviation can turn ambiguous in the next release)"
            )
            return _Meaning(spec, negates, problem=FlagProblem(name, "prefix", why))
        candidates = cat.abbreviated(option)
        if candidates:
            elsewhere = cat.accepting(option)
            itself = (
                f" ({code(option)} itself is in {ENGINE_NAMES[cat.engine]} {', '.join(elsewhere)})" if elsewhere else ""
            )
            why = (
                f"{code(name)} is ambiguous in {cat.name}: it could be {listing(candidates)}; write one in full{itself}"
            )
            return _Meaning(None, problem=FlagProblem(name, "ambiguous-prefix", why))
        return _Meaning(None, problem=not_a_flag(self.cat, name, option))

    def _dotted(self, name: str, option: str) -> _Meaning:
        """vLLM: `--compilation-config.mode 3` sets one key of a JSON flag."""
        base = self.meaning(option.split(".", 1)[0])
        if base.spec is not None and base.problem is None and base.spec.type not in ("json", "json_or_str"):
            takes = TYPE_WORDS.get(base.spec.type, base.spec.type)
            why = (
                f"{code(name)}: {self.cat.name} takes dotted keys on JSON flags only "
                f"(e.g. `--compilation-config.mode 3`); {code(base.spec.flag)} takes {takes}"
            )
            return _Meaning(base.spec, dotted=True, problem=FlagProblem(name, "type", why))
        return _Meaning(base.spec, dotted=True, problem=base.problem)

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
        follows = i < len(flags) and not is_option(flags[i])
        spec = meaning.spec or self._spec_anywhere(name)
        if spec is None:
            # Not a flag anywhere: take a following non-option as its value, so one mistake is reported once.
            return (i + 1 if explicit is None and follows else i), None
        if meaning.dotted:
            if explicit is not None:
                return i, None
            if i < len(flags):
                return i + 1, None
            return i, FlagProblem(name, "missing-value", f"{code(name)} needs a value in {cat.name}, e.g. `{name} 3`")
        if meaning.negates or not spec.takes_value:
            # An empty item after a switch is its own mistake (reported as such), not the switch's value.
            given = explicit if explicit is not None else (flags[i] if follows and flags[i].strip() else None)
            if given is None:
                return i, None
            turn_off = (
                f", or {code(spec.negations[0])} to turn it off" if spec.negations and not meaning.negates else ""
            )
            why = (
                f"{code(name)} is a switch in {cat.name} and takes no value (got {code(given)}): "
                f"write {code(name)} alone{turn_off}"
            )
            return (i + 1 if explicit is None else i), FlagProblem(name, "switch-value", why)
        values: list[str] = []
        if explicit is not None:
            values = [explicit]
        elif spec.nargs in ("+", "*"):
            while i < len(flags) and not is_option(flags[i]):
                values.append(flags[i])
                i += 1
        elif follows:
            values = [flags[i]]
            i += 1
        if not values:
            if spec.nargs in ("?", "*"):
                return i, None
            why = (
                f"{code(name)} needs a value ({TYPE_WORDS.get(spec.type, spec.type)}) in {cat.name}, "
                f"e.g. {usage(spec.flag, example_value(spec))}"
            )
            return i, FlagProblem(name, "missing-value", why)
        for value in values:
            problem = value_problem(self.cat, name, spec, value)
            if problem is not None:
                return i, problem
        return i, None


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
