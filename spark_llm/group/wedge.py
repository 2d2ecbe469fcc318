"""Is the group wedged? Every container runs, but rank 0 answers no one-token completion (spark_llm.group.serving)
for a bound: an NCCL collective that never returns, a hung scheduler (issue 32, 5). The supervisor restarts such a
group; `spark-llm status` names it.

With spark-llm:monitoring the supervisor also reads the wedge alert's own signal at rank 0 (TokenWatch): requests
running and the generated-tokens counter standing still for the bound, so the alert and the restart name one cause.

Not a wedge: one slow answer (a wedge is at least MIN_PROBES unanswered probes spanning the bound, none answered
between), nor a group still starting. The caller says which probes count: while a start is under way (loading has
its own bound, timeouts.readySeconds) only those made while rank 0's liveness route says it is up (200); once the
group served, every one (SGLang with SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION generates on /health too, which then
hangs with the rest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spark_llm.group.serving import COMPLETIONS_PATH
from spark_llm.group.times import iso

WEDGED = "wedged"
"""A restart's `cause` when the group was wedged (the supervisor's record; `spark-llm status` reads it)."""
LIVENESS_PATH = "/health"
"""Both engines' liveness route: 200 once the engine loop runs, and still 200 while a collective hangs."""
MIN_PROBES = 3
METRICS_PATH = "/metrics"
"""Where both engines serve their Prometheus metrics on rank 0's API port (SGLang with --enable-metrics)."""


def probe_seconds(bound: float) -> float:
    """How long one probe waits for its answer: a third of the bound, 2 to 30 s (a slow answer is still one)."""
    return max(2.0, min(30.0, bound / MIN_PROBES))


def asked(model: str) -> str:
    """What a probe asks, in words for a record."""
    return f"one-token completion of {model} (POST {COMPLETIONS_PATH})"


def unanswered_while_live(liveness_code: int | None, answer_code: int | None) -> bool:
    """Pure: one probe's reading during a start: the liveness route says up (200), the completion got no 200."""
    return liveness_code == 200 and answer_code != 200


@dataclass
class WedgeWatch:
    """The probes of rank 0 since its last answer: fed by the caller, which does the asking (pure, times passed in)."""

    bound: float
    """spark-llm:supervisor.wedgeSeconds."""
    what: str
    """What a probe asks (`asked`)."""
    since: float | None = None
    """When the first unanswered probe (while live) since the last answer was sent; None: rank 0 answers."""
    probes: int = 0
    last: str = ""
    """How the last unanswered probe ended (`no answer within 2 s, /health 200`)."""
    asked_at: float | None = None

    def due(self, now: float) -> bool:
        """Whether to probe now: every poll while unanswered; else every bound / MIN_PROBES (a probe is a
        generation, and a line in the engine's access log)."""
        if self.asked_at is None or self.since is not None:
            return True
        return now - self.asked_at >= self.bound / MIN_PROBES

    def answered(self, at: float) -> None:
        self.since, self.probes, self.last, self.asked_at = None, 0, "", at

    def not_answered(self, at: float, counts: bool, how: str) -> None:
        """A probe sent at `at` got no answer (`how`); `counts`: toward a wedge (not a start's: that resets)."""
        self.asked_at = at
        if not counts:
            self.since, self.probes, self.last = None, 0, ""
            return
        if self.since is None:
            self.since = at
        self.probes += 1
        self.last = how

    def reset(self) -> None:
        """A restart begins: its start is not a wedge."""
        self.since, self.probes, self.last, self.asked_at = None, 0, "", None

    def verdict(self, now: float) -> str | None:
        """Why the group is wedged (None: it is not, or not yet)."""
        if self.since is None or self.probes < MIN_PROBES or now - self.since < self.bound:
            return None
        return (
            f"wedged: rank 0 has answered no {self.what} since {iso(self.since)} ({self.probes} probes over"
            f" {now - self.since:.0f} s, the last: {self.last}; bound {self.bound:g} s), while every engine container"
            " runs"
        )


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def metric_sum(text: str, name: str) -> float | None:
    """Pure: the sum of every sample of `name` in Prometheus's text format (its labels summed over); None when the
    text has none (the engine serves no such family, or is not the engine)."""
    total, seen = 0.0, False
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found is None or found.group(1) != name:
            continue
        try:
            total += float(found.group(3))
        except ValueError:
            continue
        seen = True
    return total if seen else None


@dataclass
class TokenWatch:
    """The wedge alert's signal as the supervisor reads it at rank 0 (pure, times passed in): requests running and
    not one token generated since `since`."""

    bound: float
    generated_name: str
    generated: float | None = None
    """The counter at the last reading."""
    since: float | None = None
    """Since when requests have run with the counter standing still; None: none run, or tokens come."""
    running: float = 0.0

    def feed(self, now: float, running: float | None, generated: float | None) -> None:
        if running is None or generated is None or running <= 0:
            self.since = None
        elif self.since is None or generated != self.generated:
            self.since = now
        self.generated, self.running = generated, running or 0.0

    def verdict(self, now: float) -> str | None:
        if self.since is None or now - self.since < self.bound:
            return None
        return (
            f"wedged: {self.running:g} requests running at rank 0 and not one token generated since"
            f" {iso(self.since)} ({self.generated_name} standing at {self.generated:g} for {now - self.since:.0f} s;"
            f" bound {self.bound:g} s), while every engine container runs"
        )

    def reset(self) -> None:
        self.generated, self.since, self.running = None, None, 0.0
