"""A start's timeline as the readiness gate records it: its output line, the stack output and the head's history.

Pure. The gate (spark_llm.ops.readiness_gate) prints it for people (`timeline_lines`) on stdout, which `pulumi up`
shows, and TIMELINE_PREFIX + JSON as its last stderr line, which it does not (issue 31, 10: that line was ~1,000
characters, shown twice per `up`); components/engine_group.py reads it into the `start_timeline` output; the same
JSON is a line of the head's history of starts (spark_llm.group.history). Each node's phases are a list of
{"phase", "seconds"}: the phases' order survives (Pulumi sorts an output's keys).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from spark_llm.group.fabric import transport_summary
from spark_llm.group.history import StartRecord
from spark_llm.plan.start.phases import PROFILE_ENGINES, phases_for

TIMELINE_PREFIX = "spark-llm timeline: "
"""The readiness gate's last stdout line: the start's timeline as JSON."""


def parse_timeline(*outputs: str | None) -> dict:
    """The timeline on the gate's last TIMELINE_PREFIX line in its outputs ({} when there is none, e.g. in a preview).

    Give its stderr first, then its stdout: a gate of an older spark-llm, still in the state, printed it on stdout.
    """
    for line in reversed("\n".join(reversed([out or "" for out in outputs])).splitlines()):
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


def timeline_lines(timeline: Mapping[str, Any], title: str = "last start") -> list[str]:
    """Pure: a start's phases per node, as the readiness gate recorded them (the `start_timeline` output): what
    `spark-llm status` shows of the last start, and what the gate prints when the group serves."""
    nodes = timeline.get("nodes") if isinstance(timeline, dict) else None
    if not nodes:
        return []
    profile = timeline.get("profile")
    titles = {spec.name: spec.title for spec in phases_for(profile)} if profile in PROFILE_ENGINES else {}
    head = (
        f"{title}: revision {str(timeline.get('revision', '?'))[:12]} at {timeline.get('at', '?')}, rank 0 answered"
        f" {timeline.get('gate_seconds', '?')} s into the readiness gate"
    )
    lines = [head]
    for node in nodes:
        phases = phase_seconds(timeline, node)
        text = ", ".join(f"{titles.get(name, name)} {sec:.1f} s" for name, sec in phases.items()) or "no phases"
        lines.append(f"  {node}: {text}")
        proof = (timeline.get("fabric") or {}).get(node)
        if proof:
            # The rank's NCCL transport (spark_llm.plan.fabric_proof), and what was wrong with it if anything.
            problem = f" ({proof['problem']})" if proof.get("problem") else ""
            lines.append(f"    fabric: {transport_summary(proof)}{problem}")
    return lines
