"""The rewrites vLLM's own CLI makes to argv before its parser sees it: `--model` as the positional, dotted JSON
flags merged (`--compilation-config.mode 3`), flags spelled with `_` or `-` (standin_engine.command_line uses them).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence

from standin_engine.catalog import EngineCatalog
from standin_engine.flags import human_readable_int


class CommandLineError(Exception):
    """A command line the real engine refuses after argparse (exit 1 with its message, as the real one does)."""


def vllm_flexible_args(parser: argparse.ArgumentParser, catalog: EngineCatalog, argv: Sequence[str]) -> list[str]:
    """vLLM's FlexibleArgumentParser rewrites before argparse: `--model` to the positional (after `serve`),
    `_` to `-` in flag names, `-O<n>`, and dotted JSON keys (`--compilation-config.mode 3`) into one JSON value."""
    args = list(argv)
    if args[:1] == ["serve"]:
        args = model_flag_to_positional(parser, args)
    rewritten: list[str] = []
    for index, arg in enumerate(args):
        if arg.startswith("--"):
            key, sep, value = arg.partition("=")
            name, dot, rest = key[2:].partition(".")
            rewritten.append(f"--{name.replace('_', '-')}{dot}{rest}{sep}{value}")
        elif arg.startswith("-O") and arg != "-O" and not arg.startswith("-O."):
            level = arg[3:] if arg[2] == "=" else arg[2:]
            if catalog.has_option("--optimization-level"):
                rewritten += ["--optimization-level", level]
            else:  # 0.11: -O is --compilation-config's alias and -O3 means {"level": 3}
                rewritten.append(f"-O.level={level}")
        elif arg == "-O" and index + 1 < len(args) and args[index + 1] in {"0", "1", "2", "3"}:
            rewritten.append("--optimization-level" if catalog.has_option("--optimization-level") else "-O")
        else:
            rewritten.append(arg)
    return merge_dotted_json_args(rewritten)


def model_flag_to_positional(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    for index, arg in enumerate(args):
        if re.match(r"^--model(=.+|$)", arg):
            if arg == "--model":
                if index + 1 >= len(args) or args[index + 1].startswith("-"):
                    parser.error("argument --model: expected one argument")
                model, rest = args[index + 1], index + 2
            else:
                model, rest = arg.removeprefix("--model="), index + 1
            args = ["serve", model, *args[1:index], *args[rest:]]
            break
    if (
        len(args) > 1
        and args[1].startswith("-")
        and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", arg) for arg in args)
    ):
        raise CommandLineError(
            "ValueError: `model` should be provided as the first positional argument when using `vllm serve`. "
            "i.e. `vllm serve <model> --<arg> <value>`."
        )
    return args


def merge_dotted_json_args(args: list[str]) -> list[str]:
    """`--flag.key.sub value` and `--flag.key+ a,b` merged into `--flag '{"key": {...}}'`, appended at the end."""
    merged: dict[str, dict] = {}
    kept: list[str] = []
    skip_next = False
    for index, arg in enumerate(args):
        if skip_next:
            skip_next = False
            continue
        key, sep, value = arg.partition("=")
        if not arg.startswith("-") or "." not in key:
            kept.append(arg)
            continue
        if not sep:
            if index + 1 >= len(args):
                kept.append(arg)
                continue
            value, skip_next = args[index + 1], True
        if key.endswith("+"):
            key, parsed = key[:-1], list(value.split(","))
        else:
            parsed = dotted_value(value)
        base, *path = key.split(".")
        node = merged.setdefault(base, {})
        for part in path[:-1]:
            node = node.setdefault(part, {})
        if isinstance(parsed, list) and isinstance(node.get(path[-1]), list):
            node[path[-1]] += parsed
        else:
            node[path[-1]] = parsed
    for base, value in merged.items():
        kept += [base, json.dumps(value)]
    return kept


def dotted_value(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        try:
            return human_readable_int(text)
        except (ValueError, argparse.ArgumentTypeError):
            return text
