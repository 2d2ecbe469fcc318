"""Pure: the one way a step's spec travels on its stdin as JSON (the readiness gate's, the memory admission's)."""

from __future__ import annotations

import json
from collections.abc import Mapping


def spec_json(spec: Mapping[str, object]) -> str:
    """Keys sorted: the step's stdin changes only with what the spec says."""
    return json.dumps(spec, sort_keys=True)


def spec_object(text: str, what: str) -> dict:
    """The step's stdin -> the spec's JSON object (`what`: whose spec, for the error)."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"{what}'s spec is not a JSON object")
    return value
