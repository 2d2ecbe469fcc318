"""May the group start on the weights its members have? The one rule, for the supervisor on the head (issue 31, 2).

Each node's weights step records `TOKEN VALUE` in its drift record (spark_llm.plan.drift: `<remote_dir>/state/weights`),
VALUE the manifest digest it verified. The weights fan-out writes `unverified -` there on a worker before the first
byte of a copy reaches it, and the verified digest again only once the worker matches the head's manifest: a copy
killed midway leaves `unverified -`. An engine started on such weights loads whatever half a copy left. So the
group may start only when every member has a record, none says `unverified`, and all name the same digest;
otherwise only `pulumi up` (which copies and verifies the weights, then restarts the group in order) can mend it.

The supervisor reads the head's record from a read-only mount and a worker's with RECORD_REQUEST, which the
worker's scripts/supervisor_allow.sh answers by printing that node's record and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# The record a step leaves while it changes what it recorded (spark_llm.plan.drift reads it from here: one spelling).
UNVERIFIED = "unverified"
# What the supervisor asks a worker for its weights record (scripts/supervisor_allow.sh allows it word for word).
RECORD_REQUEST = "spark-llm weights-record"
# What to do, in every reason: the one step that copies and verifies the weights, then restarts the group.
REMEDY = "pulumi up copies and verifies them, then restarts the group"


@dataclass(frozen=True)
class WeightsRecord:
    """A node's weights record as its weights step wrote it."""

    token: str
    value: str
    """The verified manifest digest; on the head of a `model.source` kind head with another path, `DIGEST/SOURCE`
    (its source dir's digest is watched too): the weights' digest is the part before the slash."""

    @property
    def digest(self) -> str:
        return self.value.partition("/")[0]


def parse_record(text: str | None) -> WeightsRecord | None:
    """The record file's text -> the record (None: no file, or not a `TOKEN VALUE` line)."""
    words = (text or "").split()
    return WeightsRecord(words[0], words[1]) if len(words) == 2 else None


def verified_digest(text: str | None) -> str:
    """The digest a weights record's text names when its copy was verified ("" otherwise): what a start served."""
    record = parse_record(text)
    return record.digest if record is not None and record.token != UNVERIFIED else ""


def weights_problem(records: Sequence[tuple[str, str | None]]) -> str | None:
    """Why the group must not start on its weights, in words that name the node and what to do; None: it may.

    `records`: each member's name and its record's text (None: no record file), in rank order, the head first."""
    head_digest = ""
    for i, (name, text) in enumerate(records):
        record = parse_record(text)
        if text is None:
            return f"weights on {name} have no record (the weights step never completed there): {REMEDY}"
        if record is None:
            return f"weights on {name} have an unreadable record ({text.strip()[:60]!r}): {REMEDY}"
        if record.token == UNVERIFIED:
            return f"weights on {name} are not verified (a copy was cut short): {REMEDY}"
        if i == 0:
            head_digest = record.digest
        elif record.digest != head_digest:
            head = records[0][0]
            return f"weights on {name} ({record.digest[:12]}) are not those on {head} ({head_digest[:12]}): {REMEDY}"
    return None
