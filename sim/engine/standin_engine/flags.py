"""argparse parsers built from the real engines' flag catalogs: every spelling, alias, negation, nargs, type, choice.

A flag the real engine version rejects is rejected here too, with argparse's usage line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence

from standin_engine.catalog import CatalogFlag, EngineCatalog

# ---- value types: the catalogs' type names, with the real engines' parsing -------------------------------------


def human_readable_int(value: str) -> int:
    """vLLM's and SGLang's sizes: `1k` = 1000, `1K` = 1024, `25.6k` = 25600, or a plain integer."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        number, suffix = match.groups()
        if suffix.islower():
            return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))
        if "." in number:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with binary suffixes like {suffix}. "
                f"Did you mean to use {number}{suffix.lower()} instead?"
            )
        return int(number) * 2 ** (10 * "KMGT".index(suffix) + 10)
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    """human_readable_int, or `auto` / `-1` for auto-detection (-1)."""
    if value.strip() == "-1" or value.strip().lower() == "auto":
        return -1
    return human_readable_int(value)


def json_value(value: str) -> object:
    try:
        return json.loads(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"Failed to parse {value!r} as JSON: {error}") from None


def json_or_str(value: str) -> object:
    """A JSON object when the value is one, else the string (vLLM's dict-or-str flags)."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if isinstance(parsed, dict) else value


def json_list(value: str) -> list:
    parsed = json_value(value)
    if not isinstance(parsed, list):
        raise argparse.ArgumentTypeError(f"expected a JSON list, got {value!r}")
    return parsed


def list_int_or_str(value: str) -> list[int | str]:
    """Comma-separated items, integers where they are digits (vLLM's --device-ids)."""
    return [int(item) if item.strip().isdigit() else item.strip() for item in value.split(",") if item.strip()]


def bool_value(value: str) -> bool:
    """A bool flag that takes a value (deprecated vLLM 0.11 guided-decoding flags)."""
    if value.strip().lower() in ("true", "1", "yes"):
        return True
    if value.strip().lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


VALUE_TYPES: dict[str, Callable[[str], object]] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": bool_value,
    "json": json_value,
    "json_or_str": json_or_str,
    "json_list": json_list,
    "int_human_readable": human_readable_int,
    "int_human_readable_or_auto": human_readable_int_or_auto,
    "list_int_or_str_comma_separated": list_int_or_str,
}


def _nullable(parse: Callable[[str], object]) -> Callable[[str], object]:
    """vLLM's optional types: the string `None` is null, anything else goes to the type."""

    def parse_optional(value: str) -> object:
        return None if value == "None" else parse(value)

    parse_optional.__name__ = getattr(parse, "__name__", "value")
    return parse_optional


class SwitchAction(argparse.Action):
    """A bool flag: its own spellings store True, its negations (`--no-X`, `--disable-X`) store False."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        negations: Sequence[str] = (),
        default: object = None,
        required: bool = False,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, required=required, help=help)
        self.negations = frozenset(negations)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, option_string not in self.negations)

    def format_usage(self) -> str:
        # BooleanOptionalAction's usage shape, `--X | --no-X`, where the engine declares a negation.
        return " | ".join(self.option_strings) if self.negations else self.option_strings[0]


def add_catalog_flag(parser: argparse.ArgumentParser, flag: CatalogFlag) -> argparse.Action:
    """Register one catalog flag on an argparse parser with all its spellings, as the real engine does."""
    help_text = argparse.SUPPRESS if flag.hidden_from_help else None
    if not flag.takes_value:
        return parser.add_argument(
            *flag.option_strings,
            dest=flag.dest,
            action=SwitchAction,
            negations=flag.negations,
            default=flag.default,
            required=flag.required,
            help=help_text,
        )
    try:
        parse = VALUE_TYPES[flag.type]
    except KeyError:
        raise ValueError(
            f"{flag.flag}: catalog type {flag.type!r} is not one of {', '.join(sorted(VALUE_TYPES))}"
        ) from None
    if flag.nullable:
        parse = _nullable(parse)
    kwargs: dict[str, object] = {"dest": flag.dest, "type": parse, "default": flag.default, "help": help_text}
    if flag.required:
        kwargs["required"] = True
    if flag.nargs is not None:
        kwargs["nargs"] = flag.nargs
    if flag.choices is not None:
        kwargs["choices"] = [parse(choice) for choice in flag.choices]
    return parser.add_argument(*flag.option_strings, **kwargs)


DISPLAY_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}


def catalog_parser(
    catalog: EngineCatalog,
    *,
    prog: str | None = None,
    parser: argparse.ArgumentParser | None = None,
) -> argparse.ArgumentParser:
    """An argparse parser with every positional and flag of one engine version, in the catalog's order.

    A new parser named `prog`, or `parser` (a sub-command's) filled in.
    """
    if parser is None:
        parser = argparse.ArgumentParser(prog=prog)
    parser.description = (
        f"spark-llm stand-in engine: accepts the command line of {DISPLAY_NAMES[catalog.engine]} {catalog.version} "
        "(flags from its catalog, no help texts); no model, no GPU."
    )
    for positional in catalog.positionals:
        parser.add_argument(positional, nargs="?")
    for flag in catalog.flags:
        add_catalog_flag(parser, flag)
    return parser
