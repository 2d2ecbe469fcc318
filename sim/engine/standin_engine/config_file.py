"""`--config FILE`, as both real engines read it: a YAML mapping of flag names to values, merged into argv.

SGLang (ConfigArgumentMerger) and vLLM (FlexibleArgumentParser) turn each `key: value` into `--key value`
(`true` into a bare `--key`, `false` into nothing) ahead of the command line's own flags, so the command line
wins on a clash. The stand-in image has no YAML library, so it reads the flat subset such a file uses:
one `key: scalar` a line, `#` comments, scalars plain or JSON-quoted. Anything else is refused, not guessed.
"""

from __future__ import annotations

import json
import re

_LINE = re.compile(r"^(?P<key>[A-Za-z0-9][A-Za-z0-9_.-]*):\s*(?P<value>.*?)\s*$")


class ConfigFileError(ValueError):
    pass


def _scalar(text: str, where: str) -> str | bool:
    if text.startswith('"'):
        try:
            value = json.loads(text)
        except ValueError:
            raise ConfigFileError(f"{where}: unterminated or invalid double-quoted string") from None
        return str(value)
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise ConfigFileError(f"{where}: unterminated single-quoted string")
        return text[1:-1].replace("''", "'")
    if text in ("true", "True"):
        return True
    if text in ("false", "False"):
        return False
    if not text or text[0] in "[{|>&*!":
        raise ConfigFileError(f"{where}: the spark-llm stand-in reads plain scalars only (got {text!r})")
    return text.split(" #", 1)[0].rstrip()


def config_args(text: str, path: str) -> list[str]:
    """The flags a config file stands for, in file order."""
    args: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped == "---":
            continue
        where = f"{path}:{number}"
        match = _LINE.match(line)
        if not match:
            raise ConfigFileError(f"{where}: expected `key: value`, got {line!r}")
        value = _scalar(match["value"], where)
        flag = f"--{match['key']}"
        if value is True:
            args.append(flag)
        elif value is not False:
            args += [flag, value]
    return args


def expand_config_file(argv: list[str]) -> list[str]:
    """argv with `--config FILE` (or `--config=FILE`) replaced by the file's flags, placed before the first flag."""
    for index, arg in enumerate(argv):
        if arg == "--config" or arg.startswith("--config="):
            if arg == "--config":
                if index + 1 >= len(argv):
                    raise ConfigFileError("argument --config: expected one argument")
                path, rest = argv[index + 1], argv[index + 2 :]
            else:
                path, rest = arg.removeprefix("--config="), argv[index + 1 :]
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except OSError as error:
                raise ConfigFileError(f"--config {path}: {error.strerror}") from None
            remaining = [*argv[:index], *rest]
            first_flag = next((i for i, a in enumerate(remaining) if a.startswith("-")), len(remaining))
            return [*remaining[:first_flag], *config_args(text, path), *remaining[first_flag:]]
    return argv
