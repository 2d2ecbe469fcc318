"""The head's history of starts: one JSON line a start, written by the readiness gate, read by preview, status,
the canary and rollback. One path, one writer, one reader.

Later starts' stall bounds learn from the successful ones (`succeeded`); a failed start is a line too
(`failure_record`), so preview and status can say that the configured revision failed last time.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from typing import Any, TypedDict

# Relative to a node's spark-llm directory (spark_llm.plan.nodes.remote_dir).
START_HISTORY = "history/starts.jsonl"
KEPT = 20
"""Lines kept: the last KEPT starts."""
LAST_START_SECTION = "last_start"


class PhaseTime(TypedDict):
    phase: str
    seconds: float


class FabricRecord(TypedDict, total=False):
    """One rank's transport as a start recorded it (StartRecord `fabric`; spark_llm.plan.fabric_proof)."""

    transport: str
    """`IB`, `Socket`, or `unknown` (no NCCL network line in its log, or a network it cannot place)."""
    network: str
    """What `Using network` said (`IB`, `IBext_v10`, `NCCL RDMA Plugin v10`, `Socket`)."""
    devices: list[str]
    """The RDMA devices `NET/IB : Using` listed (empty on sockets)."""
    line: str
    """The `NET/... : Using` line itself, from `NET/`."""
    problem: str
    """Why this rank's transport is not what the stack asked ("" when it is)."""


HostFields = dict[str, str]
"""A node's host as a start recorded it: field -> value (spark_llm.plan.host_record)."""


class StartRecord(TypedDict, total=False):
    """One line of the history: a start that served (its timeline) or one that failed (`failed` says why)."""

    revision: str
    profile: str
    at: str
    gate_seconds: float
    nodes: dict[str, list[PhaseTime]]
    """Each node's phases in order (a list: Pulumi sorts an output's keys)."""
    canary: dict
    """The canary's answer (spark_llm.group.canary.CanaryRecord.to_json)."""
    weights: str
    """The manifest digest of the weights this start served (what `spark-llm rollback` puts back)."""
    failed: str
    fabric: dict[str, FabricRecord]
    """Each rank's NCCL transport, with roceDevices (spark_llm.plan.fabric_proof)."""
    hosts: dict[str, HostFields]
    """Each node's host at a start that served (spark_llm.plan.host_record)."""
    by: str
    """Who made the start: `supervisor` for the supervisor's own restart (absent: `pulumi up`'s readiness gate)."""


def history_path(remote_dir: str) -> str:
    """Where the history lives under the head's spark-llm directory."""
    return f"{remote_dir}/{START_HISTORY}"


def record_line(record: StartRecord) -> str:
    """The one writer's line: keys sorted, so `"revision": "<hex>"` is spelled exactly so (`last_start_probe`)."""
    return json.dumps(record, sort_keys=True)


def append_script(path: str, record: StartRecord, kept: int = KEPT) -> str:
    """Bash that appends `record` to the history at `path` (atomically), keeping the last `kept` lines."""
    return (
        f'f={shlex.quote(path)}\nmkdir -p "$(dirname "$f")"\n'
        f"{{ tail -n {kept - 1} \"$f\" 2>/dev/null || true; printf '%s\\n' {shlex.quote(record_line(record))}; }}"
        ' > "$f.new"\nmv "$f.new" "$f"\n'
    )


def read_script(path: str, kept: int = KEPT) -> str:
    """Read-only bash printing the history's last `kept` lines (nothing when there is none)."""
    return f"tail -n {int(kept)} {shlex.quote(path)} 2>/dev/null || true\n"


def parse_history(text: str) -> list[StartRecord]:
    """The one reader: the lines `read_script` printed -> the records, oldest first (lines that are not one skipped)."""
    records: list[StartRecord] = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)  # type: ignore[arg-type]
    return records


def failure_record(revision: str, profile: str, reason: str, at: str) -> StartRecord:
    """A failed start as the history keeps it."""
    return {"revision": revision, "profile": profile, "at": at, "failed": reason}


def succeeded(records: list[StartRecord]) -> list[StartRecord]:
    """The starts that reached a completion (a failed start's phases say nothing of how long a phase may take)."""
    return [r for r in records if isinstance(r, dict) and not r.get("failed")]


def last_start_probe(path: str, revision: str) -> str:
    """Read-only bash printing `last_start<TAB>JSON`: the history's latest line about `revision`."""
    needle = f'"revision": "{revision}"'
    found = f"grep -F {shlex.quote(needle)} {shlex.quote(path)} 2>/dev/null | tail -n 1"
    return f'if line=$({found}) && [ -n "$line" ]; then\n  printf "{LAST_START_SECTION}\\t%s\\n" "$line"\nfi\n'


def appended(text: str, record: StartRecord, kept: int = KEPT) -> str:
    """Pure: the history's text with `record` as its newest line, the last `kept` lines kept (the supervisor's
    writer; the gate's is `append_script`, the same lines over ssh)."""
    lines = [line for line in text.splitlines() if line.strip()] + [record_line(record)]
    return "".join(line + "\n" for line in lines[-kept:])


def read_file(path: str) -> list[StartRecord]:
    """The history file at `path` (on the head, where the supervisor reads it), oldest first; [] when unreadable."""
    try:
        with open(path) as f:
            return parse_history(f.read())
    except OSError:
        return []


def append_file(path: str, record: StartRecord) -> None:
    """`record` as the newest line of the history file at `path` (written whole, then renamed over it)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    with open(path + ".tmp", "w") as f:
        f.write(appended(text, record))
    os.replace(path + ".tmp", path)


def restart_record(revision: str, profile: str, restart: Mapping[str, Any], weights: str = "") -> StartRecord:
    """The supervisor's restart as the history keeps a start (`by: supervisor`): a served one with its seconds to
    serving and the weights it served (what `spark-llm rollback` puts back), a failed one with why."""
    at = str(restart.get("at", ""))
    result = str(restart.get("result", ""))
    if result != "served":
        return {**failure_record(revision, profile, result.removeprefix("failed: "), at), "by": "supervisor"}
    entry: StartRecord = {
        "revision": revision,
        "profile": profile,
        "at": at,
        "by": "supervisor",
        "gate_seconds": float(restart.get("seconds_to_serving") or 0.0),
        "nodes": {},
    }
    if weights:
        entry["weights"] = weights
    return entry


def fabric_fallbacks(text: str | None, revision: str) -> tuple[StartRecord, list[tuple[str, FabricRecord]]] | None:
    """A `last_start` line's record when it is a start of `revision` that served with a rank not on the transport
    the stack asked (NCCL on sockets, a twin missing), with those ranks; None otherwise. Whoever made the start (the
    gate under `fabricProof: warn`, or the supervisor, which keeps a group on sockets serving), status and preview
    say so from here."""
    found = parse_history(text or "")
    entry = found[-1] if found else None
    if entry is None or entry.get("revision") != revision or entry.get("failed"):
        return None
    bad = [(node, rank) for node, rank in sorted((entry.get("fabric") or {}).items()) if rank.get("problem")]
    return (entry, bad) if bad else None


def fallback_sentence(entry: StartRecord, bad: list[tuple[str, FabricRecord]]) -> str:
    """What status and preview say of a start that serves off the fabric it asked for (`fabric_fallbacks`)."""
    who = "the supervisor's restart" if entry.get("by") == "supervisor" else "`pulumi up`"
    ranks = "; ".join(f"{node}: {rank.get('problem')}" for node, rank in bad)
    nodes = ", ".join(node for node, _ in bad)
    return (
        f"{ranks} (the start of {entry.get('at', '?')}, by {who}). The group serves, at a fraction of the link's"
        f" speed. Check on {nodes}: the RDMA row of `spark-llm preflight`, the device names in"
        " spark-llm:network.roceDevices against `ibdev2netdev`, /dev/infiniband in the engine's container and its"
        " memlock limit; once fixed, `spark-llm restart` starts the group again on RoCE"
    )


def last_failure(text: str | None, revision: str) -> StartRecord | None:
    """A `last_start` line's record when it is a failed start of `revision` (None otherwise)."""
    found = parse_history(text or "")
    entry = found[-1] if found else None
    if entry is None or entry.get("revision") != revision or not entry.get("failed"):
        return None
    return entry
