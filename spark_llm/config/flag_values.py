"""How the engines' parsers read a value, and how a refusal spells a flag: the value types, examples, and the
one-line wording every FlagProblem uses (spark_llm.config.engine_flags).
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Sequence

from spark_llm.config.engine_catalog import NUMERIC_RANGES, Catalog, FlagProblem, FlagSpec

# Dashes a word processor or a web page puts where `--` was typed: en dash, em dash, minus sign.
TYPOGRAPHIC_DASHES = "\u2013\u2014\u2212"
# argparse's own test: a token like this is a value (a negative number), not an option.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# vLLM's human_readable_int (SGLang's int_human_readable follows it): 25.6k = 25600, 1K = 1024.
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_JSON_OBJECT = re.compile(r"(?s)^\s*{.*}\s*$")

TYPE_WORDS = {
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
TYPE_EXAMPLES = {
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


def parses_as(kind: str, value: str) -> bool | str:
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


def example_value(spec: FlagSpec) -> str:
    """A value the flag takes: its first choice, its default, or one of its type."""
    if spec.choices:
        return spec.choices[0]
    default = spec.default
    if default is not None and not isinstance(default, bool) and spec.type != "bool":
        text = json.dumps(default) if isinstance(default, dict | list) else str(default)
        if text and parses_as(spec.type, text) is True:
            return text
    return TYPE_EXAMPLES.get(spec.type, "VALUE")


# ---------- reading the tokens the way argparse does ----------


def is_option(token: str) -> bool:
    """Whether argparse reads `token` as an option rather than as a value."""
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER.match(token) and " " not in token


def ascii_dashes(token: str) -> str:
    """`token` with leading typographic dashes (`—x`, `–x`) written as the `--` they stand for."""
    rest = token.lstrip(TYPOGRAPHIC_DASHES)
    return "--" + rest.lstrip("-") if rest != token and rest.strip("-") else token


def printable(text: str) -> str:
    """`text` with control characters escaped (`\\n`), so that each refusal stays one line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def code(text: str) -> str:
    return f"`{printable(text)}`"


def usage(flag: str, value: str) -> str:
    """`--flag value` as a shell would need it written."""
    return code(f"{flag} {shlex.quote(value)}")


def listing(items: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(code(i) for i in items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def value_problem(cat: Catalog, name: str, spec: FlagSpec, value: str) -> FlagProblem | None:
    """The problem with one value of a flag in this release (type, range, choice); None when it is taken."""
    if spec.nullable and value == "None":
        return None
    valid = parses_as(spec.type, value)
    if valid is not True and spec.type == "bool":
        return FlagProblem(name, "type", f"{usage(name, value)}: in {cat.name} {valid}")
    if valid is not True:
        why = f" ({valid})" if isinstance(valid, str) else ""
        return FlagProblem(
            name,
            "type",
            f"{usage(name, value)}: {cat.name} wants {TYPE_WORDS.get(spec.type, spec.type)}{why}, "
            f"e.g. {usage(spec.flag, example_value(spec))}",
        )
    bounds = NUMERIC_RANGES.get((cat.engine, spec.flag))
    if bounds is not None and not bounds.holds(float(value)):
        example = example_value(spec)
        if not bounds.holds(float(example)):
            example = "0.8"
        why = (
            f"{usage(name, value)}: out of range for {cat.name}: {bounds.what} is {bounds.words()} "
            f"({bounds.refusal}); e.g. {usage(spec.flag, example)}"
        )
        return FlagProblem(name, "range", why)
    if spec.choices:
        given = str(int(value)) if spec.type == "int" else value
        if given not in spec.choices:
            # A cut-short choice (`bfloat`) means the one it starts, before any spelling alike (`float`).
            started = [c for c in spec.choices if c.startswith(given)] if given else []
            close = started if len(started) == 1 else difflib.get_close_matches(given, spec.choices, n=1, cutoff=0.6)
            hint = f"; did you mean {code(close[0])}?" if close else ""
            why = f"{usage(name, value)}: not a choice of {cat.name}; one of {listing(spec.choices)}{hint}"
            return FlagProblem(name, "choice", why)
    return None
