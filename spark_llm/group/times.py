"""Docker's times, read one way: `docker inspect`'s StartedAt/FinishedAt and `docker logs --timestamps` prefixes.

Docker writes RFC 3339 with up to nine fraction digits and trims trailing zeros (`...:05.1Z` is later than
`...:05.05Z`, so the strings do not sort as times), and `0001-01-01T00:00:00Z` for "never". Python's fromisoformat
takes six digits at most: the fraction is read here, as digits, to the nanosecond.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

# A Docker time at the start of a text (a log line's prefix is followed by a space).
DOCKER_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")
NEVER = "0001-"


def docker_time_ns(text: str) -> int | None:
    """A Docker time (the whole text) -> nanoseconds since the epoch; None for Docker's zero time or no time."""
    match = DOCKER_TIME.fullmatch((text or "").strip())
    return _ns(match) if match else None


def docker_time(text: str) -> float | None:
    """A Docker time (the whole text) -> epoch seconds; None for Docker's zero time or no time."""
    ns = docker_time_ns(text)
    return None if ns is None else seconds(ns)


def seconds(ns: int) -> float:
    """Nanoseconds since the epoch -> epoch seconds, the fraction as exact as a float holds it (not ns / 1e9)."""
    whole, fraction = divmod(ns, 1_000_000_000)
    return whole + fraction / 1e9


def split_stamp(line: str) -> tuple[int | None, str]:
    """A `docker logs --timestamps` line -> (its time in nanoseconds or None, the text after the stamp's space)."""
    match = DOCKER_TIME.match(line)
    if not match:
        return None, line
    rest = line[match.end() :]
    return _ns(match), rest[1:] if rest.startswith(" ") else rest


def later(a: str, b: str) -> bool:
    """Docker time `a` is after `b` (False when either is not a time)."""
    ta, tb = docker_time_ns(a), docker_time_ns(b)
    return ta is not None and tb is not None and ta > tb


def iso(epoch: float) -> str:
    """Epoch seconds -> `2026-12-04T10:00:00Z`, the form every record of the group keeps."""
    # timezone.utc, not datetime.UTC: the supervisor runs this on an engine image's Python, which may be 3.10.
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: UP017


def _ns(match: re.Match[str]) -> int | None:
    if match.group(1).startswith(NEVER):
        return None
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    seconds = int(datetime.fromisoformat(match.group(1) + zone).timestamp())
    return seconds * 1_000_000_000 + int((match.group(2) or "0").ljust(9, "0"))
