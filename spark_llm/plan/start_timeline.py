"""A start's timeline as the readiness gate records it: its stdout line, the stack output and the head's history.

Pure. The gate (spark_llm.remote.readiness) prints TIMELINE_PREFIX + JSON as its last line; components/engine_group.py
reads it into the `start_timeline` output; the same JSON is a line of START_HISTORY on the head. Each node's phases
are a list of {"phase", "seconds"}: the phases' order survives (Pulumi sorts an output's keys).
"""

from __future__ import annotations

import json
import shlex

# Where the readiness gate keeps the stack's earlier starts on the head (one JSON line each, the last 20), relative
# to its spark-llm directory: later starts' stall bounds learn from them, and `spark-llm status` shows them.
START_HISTORY = "history/starts.jsonl"
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


def phase_seconds(timeline: dict, node: str) -> dict[str, float]:
    """Seconds per phase of `node` in a recorded timeline (its `nodes` entry: a list of {phase, seconds})."""
    entries = (timeline.get("nodes") or {}).get(node) if isinstance(timeline, dict) else None
    result: dict[str, float] = {}
    for entry in entries if isinstance(entries, list) else []:
        try:
            result[str(entry["phase"])] = float(entry["seconds"])
        except (KeyError, TypeError, ValueError):
            continue
    return result


def failure_record(revision: str, profile: str, reason: str, at: str) -> dict:
    """A failed start as the head's history keeps it: later starts' stall bounds skip it (`succeeded`), and
    `pulumi preview` and `spark-llm status` say that the configured revision failed last time (`last_start_of`)."""
    return {"revision": revision, "profile": profile, "at": at, "failed": reason}


def succeeded(history: list[dict]) -> list[dict]:
    """The starts that reached a completion (a failed start's phases say nothing of how long a phase may take)."""
    return [entry for entry in history if isinstance(entry, dict) and not entry.get("failed")]


LAST_START_SECTION = "last_start"


def last_start_probe(history_path: str, revision: str) -> str:
    """Pure: read-only bash printing `last_start<TAB>JSON`, the head's latest history line about `revision`."""
    # The gate writes each line with json.dumps(sort_keys=True): `"revision": "<hex>"` is spelled exactly so.
    needle = f'"revision": "{revision}"'
    found = f"grep -F {shlex.quote(needle)} {shlex.quote(history_path)} 2>/dev/null | tail -n 1"
    return f'if line=$({found}) && [ -n "$line" ]; then\n  printf "{LAST_START_SECTION}\\t%s\\n" "$line"\nfi\n'


def last_failure(text: str | None, revision: str) -> dict | None:
    """Pure: a `last_start` line's record when it is a failed start of `revision` (None otherwise)."""
    try:
        entry = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("revision") != revision or not entry.get("failed"):
        return None
    return entry


def failed_start_warning(entry: dict, running: str | None) -> str:
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
