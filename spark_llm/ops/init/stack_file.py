"""Pure: the stack file `spark-llm init` writes, every discovered value with a comment saying where it came from.

PyYAML writes no comments, so the file is put together here as text: the discovered keys by hand, the keys from a
recipe or `--config-from` file dumped as YAML under a comment naming where they came from. `written_config` parses
the result back, and init checks it with the program's own config parse before anything is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from spark_llm.config import NAMESPACE


@dataclass(frozen=True)
class Value:
    """A discovered value and where it came from (the comment beside it)."""

    value: Any
    source: str = ""


@dataclass(frozen=True)
class NodeEntry:
    name: Value
    role: str
    host: Value
    port: int
    user: str
    fabric_address: Value
    host_key: Value
    via: str | None = None


@dataclass(frozen=True)
class Extra:
    """Config keys from elsewhere (a recipe, a `--config-from` file): {"spark-llm:key": value}, and from where."""

    keys: dict[str, Any]
    source: str


@dataclass(frozen=True)
class StackFile:
    header: str
    pulumi_keys: dict[str, Any]  # what Pulumi keeps in the file (encryptionsalt, secretsprovider): kept as it is
    key_path: Value
    nodes: list[NodeEntry]
    network: dict[str, Value]  # fabricInterfaces, roceDevices, mtu
    extras: list[Extra] = field(default_factory=list)


def _scalar(value: Any) -> str:
    """One YAML scalar or flow sequence (JSON is YAML): strings always quoted, so no value changes type."""
    return json.dumps(value)


def _comment(source: str) -> str:
    return f"  # {source}" if source else ""


def _block(key: str, value: Any, indent: int) -> list[str]:
    pad = " " * indent
    dumped = yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False, width=1000).rstrip("\n")
    return [pad + line for line in dumped.splitlines()]


def render(doc: StackFile) -> str:
    """Pure: the stack file's text."""
    lines = [f"# {line}" if line else "#" for line in doc.header.splitlines()]
    for key, value in doc.pulumi_keys.items():
        lines += _block(key, value, 0)
    lines.append("config:")
    lines.append(f"  {NAMESPACE}:sshKeyPath: {_scalar(doc.key_path.value)}{_comment(doc.key_path.source)}")
    lines.append(f"  {NAMESPACE}:nodes:")
    for node in doc.nodes:
        lines.append(f"  - name: {_scalar(node.name.value)}{_comment(node.name.source)}")
        lines.append(f"    role: {node.role}")
        lines.append(f"    host: {_scalar(node.host.value)}{_comment(node.host.source)}")
        lines.append(f"    port: {node.port}")
        lines.append(f"    user: {_scalar(node.user)}")
        lines.append(f"    fabricAddress: {_scalar(node.fabric_address.value)}{_comment(node.fabric_address.source)}")
        if node.via:
            lines.append(f"    via: {_scalar(node.via)}  # reached through the head, as init and the program reach it")
        lines.append(f"    # {node.host_key.source}")
        lines.append(f"    hostKey: {_scalar(node.host_key.value)}")
    merged = merge_extras(doc.extras)
    network_extra, network_source = merged.pop(f"{NAMESPACE}:network", ({}, ""))
    lines.append(f"  {NAMESPACE}:network:")
    for key, value in doc.network.items():
        if value.source:
            lines.append(f"    # {value.source}")
        lines.append(f"    {key}: {_scalar(value.value)}")
    # Each key of the network section from elsewhere says the file it came from (the last one that set it).
    sources = {
        key: extra.source
        for extra in doc.extras
        for key in (extra.keys.get(f"{NAMESPACE}:network") or {})
        if isinstance(extra.keys.get(f"{NAMESPACE}:network"), dict)
    }
    said = ""
    for key, value in network_extra.items():
        if key in doc.network:
            continue
        if sources.get(key, network_source) != said:
            said = sources.get(key, network_source)
            lines.append(f"    # {said}")
        lines += _block(key, value, 4)
    said = ""
    for key, (value, source) in merged.items():
        if key in _DISCOVERED:
            continue
        if source != said:  # one comment for a run of keys from the same place
            lines.append(f"  # {source}")
            said = source
        lines += _block(key, value, 2)
    return "\n".join(lines) + "\n"


# Keys init writes from what it found: a recipe or a --config-from file does not replace them.
_DISCOVERED = (f"{NAMESPACE}:nodes", f"{NAMESPACE}:sshKeyPath")


def merge_extras(extras: list[Extra]) -> dict[str, tuple[Any, str]]:
    """Pure: the extras' keys, later ones winning, a mapping merged key by key (a recipe's engine flags and a file's
    engine port both stay); each with the sources it came from."""
    merged: dict[str, tuple[Any, str]] = {}
    for extra in extras:
        for key, value in extra.keys.items():
            if key in merged and isinstance(value, dict) and isinstance(merged[key][0], dict):
                earlier, source = merged[key]
                merged[key] = ({**earlier, **value}, f"{source}; {extra.source}")
            else:
                merged[key] = (value, extra.source)
    return merged


def written_config(text: str) -> dict[str, Any]:
    """The `config:` mapping of a rendered file, as Pulumi reads it."""
    return (yaml.safe_load(text) or {}).get("config") or {}
