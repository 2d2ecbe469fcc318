"""What every stack config section shares: the model base, the number types, and the error messages.

An invalid value becomes one line per mistake: the key path as written in Pulumi.<stack>.yaml
(`spark-llm:nodes[1].port`), what is wrong in words, and a valid value spelled as YAML writes it (`false`,
not Python's `False`). spark_llm.config re-exports what other modules use.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

NAMESPACE = "spark-llm"


class ConfigError(ValueError):
    """A stack config value is invalid; the message names the key and shows a valid value."""


class KeyedError(ValueError):
    """A mistake found by a check of a whole section, about one key inside it.

    `loc` continues the checked key's path (`(2, "name")` under `nodes` is `spark-llm:nodes[2].name`);
    `example`, when given, is a valid value for it in this very config (e.g. the head's actual name);
    `show_example=False` when the message already lists what to write.
    """

    def __init__(
        self, message: str, loc: tuple[str | int, ...], example: Any = None, *, show_example: bool = True
    ) -> None:
        super().__init__(message)
        self.loc = loc
        self.example = example
        self.show_example = show_example


class SeveralKeyedError(ValueError):
    """Every mistake one check found (each bad entry of a map), reported together rather than the first alone."""

    def __init__(self, errors: list[KeyedError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors


class ConfigModel(BaseModel):
    """A section of the stack config: camelCase keys as in Pulumi.<stack>.yaml, no unknown keys, immutable."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def _not_a_bool(value: Any) -> Any:
    # pydantic reads `true` as 1 for an int: `port: true` would become port 1.
    if isinstance(value, bool):
        raise ValueError(f"must be a number, not {json.dumps(value)}")
    return value


Int = Annotated[int, BeforeValidator(_not_a_bool)]
Port = Annotated[Int, Field(ge=1, le=65535)]


# ---------- messages ----------


def yaml_spelling(value: Any, limit: int | None = None) -> str:
    """A value as the user writes it in Pulumi.<stack>.yaml: text as it is, anything else as JSON (`false`)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def closest(key: str, known: Iterable[str]) -> str | None:
    """The known key the user most likely meant: the same letters in another case or style, or a near spelling."""
    known = list(known)

    def squash(text: str) -> str:
        return text.replace("_", "").replace("-", "").lower()

    same = [k for k in known if squash(k) == squash(key)]
    if same:
        return same[0]
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.7)
    return near[0] if near else None


def unknown_key_message(key: str, known: Iterable[str], where: str) -> str:
    """Why `key` is refused, with the key the user probably meant."""
    known = sorted(known)
    guess = closest(key, known)
    hint = f"did you mean {guess}? " if guess else ""
    return f"not permitted: {where} has no key {key!r}; {hint}its keys: {', '.join(known)}"


def key_path(loc: tuple[Any, ...]) -> str:
    """`("nodes", 1, "port")` -> `spark-llm:nodes[1].port`."""
    out = f"{NAMESPACE}:{loc[0]}" if loc else NAMESPACE
    for part in loc[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _keys_of(model: type[BaseModel]) -> dict[str, Any]:
    return {f.alias or n: f for n, f in model.model_fields.items()}


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The section model a field holds (itself, in a list, or optional)."""
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _walk(root: type[BaseModel], loc: tuple[Any, ...]) -> tuple[Any, type[BaseModel] | None]:
    """(the field at `loc`, or None; the section model at `loc`, or None)."""
    model: type[BaseModel] | None = root
    field = None
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None:
            return field, None
        field = _keys_of(model).get(part)
        if field is None:
            return None, None
        model = _model_of(field.annotation)
    return field, model


def _example_for(root: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    """The declared example of the field at `loc`; for one item of a list (`roceDevices[1]`), one item of it."""
    field, _ = _walk(root, loc)
    extra = field.json_schema_extra if field is not None else None
    example = extra.get("example") if isinstance(extra, dict) else None
    if loc and isinstance(loc[-1], int) and isinstance(example, list) and example:
        return example[0]
    return example


def _message(root: type[BaseModel], error: Any, loc: tuple[Any, ...]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden" and loc:
        _, parent = _walk(root, loc[:-1])
        if parent is not None:
            return unknown_key_message(str(loc[-1]), _keys_of(parent), key_path(loc[:-1]))
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        _, model = _walk(root, loc)
        if model is not None:
            return f"must be a mapping of keys ({', '.join(_keys_of(model))}), not {yaml_spelling(error['input'], 60)}"
        return f"must be a mapping, not {yaml_spelling(error['input'], 60)}"
    if kind == "missing":
        return "required: this key is missing"
    if kind == "string_type" and isinstance(error.get("input"), bool | int | float):
        # `pulumi config set --path` types `true`, `false` and integers: a flag's value such as 2 lands as a number.
        value = yaml_spelling(error["input"])
        stored = "a boolean" if isinstance(error["input"], bool) else "a number"
        return (
            f"must be a string, and {value} was stored as {stored} (`pulumi config set"
            f" --path` types true, false and numbers): set it again with `--type string`, e.g. `pulumi config set"
            f" --path --type string '{key_path(loc)}' {value}`"
        )
    return str(error["msg"]).removeprefix("Value error, ")


def _keyed_line(root: type[BaseModel], loc: tuple[Any, ...], keyed: KeyedError | None, message: str | None) -> str:
    """`spark-llm:<key>: what is wrong (e.g. a valid value)` for one error at `loc` (continued by `keyed.loc`)."""
    example, show = None, True
    if keyed is not None:
        loc, example, show = loc + keyed.loc, keyed.example, keyed.show_example
        message = message or str(keyed)
    if example is None and show:
        example = _example_for(root, loc)
    line = f"{key_path(loc)}: {message}"
    if example is not None:
        line += f" (e.g. {yaml_spelling(example)})"
    return line


def format_errors(root: type[BaseModel], err: ValidationError) -> str:
    """Every error of `err` (validating `root`) as `spark-llm:<key>: what is wrong (e.g. a valid value)`."""
    lines = []
    for error in err.errors():
        loc = tuple(error["loc"])
        found = (error.get("ctx") or {}).get("error")
        if isinstance(found, SeveralKeyedError):
            lines += [_keyed_line(root, loc, keyed, str(keyed)) for keyed in found.errors]
            continue
        keyed = found if isinstance(found, KeyedError) else None
        lines.append(_keyed_line(root, loc, keyed, None if keyed else _message(root, error, loc)))
    return "invalid stack configuration:\n  " + "\n  ".join(lines)
