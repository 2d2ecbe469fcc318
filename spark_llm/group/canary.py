"""The canary: one fixed completion at temperature 0, recorded when the group starts and asked again later.

Pure. Health says the engine answers; the canary says it still answers the same: a changed model file, image,
kernel or GPU state that still serves shows as a different completion of the same prompt. The readiness gate
records it (spark_llm.remote.canary.gate_canary) in the start's timeline (spark_llm.plan.start.timeline: the gate's
stdout line, the `start_timeline` output, the head's history of starts); `spark-llm status` asks again and reports
any change of the answer, the node set or the revision with both sides shown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

CANARY_PROMPT = "Count from one to ten: one, two, three,"
CANARY_MAX_TOKENS = 8
SUPERVISOR = "supervisor"
"""A start record's `by` when the supervisor made it (spark_llm.group.history.restart_record)."""
TIMELINE_KEY = "canary"
"""The canary's key in a start's timeline dict."""


def request_body(model: str) -> dict:
    """The canary's /v1/completions request: greedy (temperature 0), so the same engine gives the same text."""
    return {"model": model, "prompt": CANARY_PROMPT, "max_tokens": CANARY_MAX_TOKENS, "temperature": 0}


@dataclass(frozen=True)
class CanaryRecord:
    """One canary answer: the text, what answered (revision, node set) and when; `error` when it did not answer."""

    answer: str
    revision: str
    nodes: tuple[str, ...]
    at: str
    error: str = ""

    def to_json(self) -> dict:
        return {
            "answer": self.answer,
            "revision": self.revision,
            "nodes": list(self.nodes),
            "at": self.at,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, value: object) -> CanaryRecord | None:
        """A record from a timeline's `canary` entry; None when it is missing or not a record."""
        if not isinstance(value, dict) or not isinstance(value.get("answer"), str):
            return None
        nodes = value.get("nodes")
        return cls(
            answer=value["answer"],
            revision=str(value.get("revision", "")),
            nodes=tuple(str(n) for n in nodes) if isinstance(nodes, list) else (),
            at=str(value.get("at", "")),
            error=str(value.get("error") or ""),
        )


def split_status(output: str) -> tuple[str, str]:
    """curl's output as the completion is asked (spark_llm.remote.canary.completion_command: the response body, then
    ` HTTP<code>` on the last line) -> (the body, the code's digits, '' when there are none)."""
    body, _, code = output.rstrip().rpartition(" HTTP")
    return body, code if code.isdigit() else ""


def parse_answer(output: str) -> tuple[str, str]:
    """(answer text, error) from the head's curl output: the response body, then ` HTTP<code>` on the last line."""
    body, code = split_status(output)
    if not code:
        return "", f"no HTTP answer: {output.strip()[-200:]!r}"
    if code != "200":
        return "", f"HTTP {code}: {body.strip()[-200:]}"
    try:
        choices = json.loads(body).get("choices") or []
        text = choices[0]["text"]
    except (ValueError, AttributeError, IndexError, KeyError, TypeError):
        return "", f"not a completion: {body.strip()[-200:]!r}"
    return (text, "") if isinstance(text, str) else ("", f"not a completion: {body.strip()[-200:]!r}")


def changes(recorded: CanaryRecord, now: CanaryRecord) -> list[str]:
    """What differs between the recorded canary and this one: "answer", "node set", "revision" (in that order)."""
    out = []
    if now.error or now.answer != recorded.answer:
        out.append("answer")
    if sorted(now.nodes) != sorted(recorded.nodes):
        out.append("node set")
    if now.revision != recorded.revision:
        out.append("revision")
    return out


def recorded_canary(revision: str, timelines: Sequence[Mapping[str, Any]]) -> CanaryRecord | None:
    """The canary recorded for `revision` in these timelines (oldest first; the last such record wins).

    The readiness gate's record of a revision is the one compared with: the supervisor records its restarts' canary
    too (`by: supervisor`), but a restart that answers differently must show as a change, not become the answer
    compared with; its record counts only for a revision no gate recorded. A revision without a record but an older
    one with it: the newest record (of another revision), so the change of revision shows; the running group was
    then not started through the gate, or its record was lost. None when no timeline has a canary (the group started
    before spark-llm recorded one).
    """
    entries = [t for t in timelines if isinstance(t, Mapping)]
    gates = [t for t in entries if t.get("by") != SUPERVISOR]
    for pool in (gates, entries):
        records = [r for r in _records(pool) if r.answer or r.error]
        same = [r for r in records if r.revision == revision]
        if same:
            return same[-1]
    records = [r for r in _records(entries) if r.answer or r.error]
    return records[-1] if records else None


def after_restart(
    output: str, revision: str, nodes: Sequence[str], timelines: Sequence[Mapping[str, Any]]
) -> tuple[CanaryRecord, str]:
    """Pure but for the clock: the supervisor's restart's canary from what it got (`output`, as `parse_answer`
    reads it), and what to say of it against the gate's record ("" when they agree: `restart_changes`)."""
    answer, error = parse_answer(output)
    record = CanaryRecord(answer, revision, tuple(nodes), datetime.now(UTC).isoformat(timespec="seconds"), error)
    return record, restart_changes(revision, timelines, record)


def restart_changes(revision: str, timelines: Sequence[Mapping[str, Any]], now: CanaryRecord) -> str:
    """Pure: what the supervisor says of its restart's canary against the gate's record of the revision ("" when
    they agree, or when no gate recorded this revision's)."""
    entries = [t for t in timelines if isinstance(t, Mapping) and t.get("by") != SUPERVISOR]
    same = [r for r in _records(entries) if r.revision == revision and r.answer]
    if not same:
        return ""
    recorded = same[-1]
    if now.error:
        return (
            f"the canary got no answer after the restart ({now.error}); the start by `pulumi up` answered"
            f" {recorded.answer!r}"
        )
    if now.answer != recorded.answer:
        return (
            f"the canary answers {now.answer!r} after the restart; the start by `pulumi up` answered"
            f" {recorded.answer!r}: the same revision answers differently (weights, GPU state: `spark-llm status`)"
        )
    return ""


def _records(timelines: Iterable[Mapping[str, Any]]) -> Iterable[CanaryRecord]:
    for timeline in timelines:
        record = CanaryRecord.from_json(timeline.get(TIMELINE_KEY)) if isinstance(timeline, Mapping) else None
        if record is not None:
            yield record


def describe(record: CanaryRecord) -> str:
    """One line: what answered, when, and the answer (or why there was none)."""
    what = f"revision {record.revision[:12] or '?'}, nodes {', '.join(record.nodes) or '?'}, at {record.at or '?'}"
    return f"{what}: {record.answer!r}" if not record.error else f"{what}: no answer ({record.error})"
