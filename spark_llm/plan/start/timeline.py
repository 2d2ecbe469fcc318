"""A start's timeline as the readiness gate records it: its stdout line, the stack output and the head's history.

Pure. The gate (spark_llm.remote.readiness) prints TIMELINE_PREFIX + JSON as its last line; components/engine_group.py
reads it into the `start_timeline` output; the same JSON is a line of the head's history of starts
(spark_llm.group.history). Each node's phases are a list of {"phase", "seconds"}: the phases' order survives (Pulumi
sorts an output's keys).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from spark_llm.group.history import StartRecord

TIMELINE_PREFIX = "spark-llm timeline: "
"""The readiness gate's last stdout line: the start's timeline as JSON."""


def parse_timeline(stdout: str | None) -> dict:
    """The timeline on the gate's last TIMELINE_PREFIX line ({} when there is none, e.g. in a preview)."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(TIMELINE_PREFIX):
            try:
                value = json.loads(line[len(TIMELINE_PREFIX) :])
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


def phase_seconds(timeline: Mapping[str, Any], node: str) -> dict[str, float]:
    """Seconds per phase of `node` in a recorded timeline (its `nodes` entry: a list of {phase, seconds})."""
    entries = (timeline.get("nodes") or {}).get(node) if isinstance(timeline, dict) else None
    result: dict[str, float] = {}
    for entry in entries if isinstance(entries, list) else []:
        try:
            result[str(entry["phase"])] = float(entry["seconds"])
        except (KeyError, TypeError, ValueError):
            continue
    return result


def failed_start_warning(entry: StartRecord, running: str | None) -> str:
    """Pure: what `pulumi preview` and `up` say when the configured revision failed to start last time.

    `running`: the revision the head's engine runs now (None: none runs).
    """
    revision = entry.get("revision", "?")
    now = (
        f"the nodes run revision {running} (the one that served before: a rollback)"
        if running and running != revision
        else "no engine of it serves"
    )
    return (
        f"revision {revision} (this config) failed to start last time ({entry.get('at', '?')}: {entry.get('failed')});"
        f" {now}. `pulumi up` relaunches revision {revision} as it is: fix the config first."
    )
