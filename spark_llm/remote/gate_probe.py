"""The readiness gate's probe of rank 0, read as the supervisor reads its own (spark_llm.group.wedge).

One round trip on the head: the one-token completion, then the liveness route. A start whose rank 0 says it is up
(its /health 200) yet answers no completion for the wedge bound, or that answered once and then nothing for the
bound, is a failed start named `wedged`: not a wait until timeouts.readySeconds, and not a start that passes on one
answer and leaves the supervisor to restart into the same wedge (issue 41, 4).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from spark_llm.group.canary import split_status
from spark_llm.group.serving import serving_request
from spark_llm.group.wedge import LIVENESS_PATH, WedgeWatch, asked, probe_seconds, unanswered_while_live
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.readiness import ReadinessSpec
from spark_llm.remote.canary import REQUEST_SECONDS, completion_command
from spark_llm.remote.runner import run_script

LIVE_PREFIX = "LIVE"
POLL_SECONDS = 2.0
"""The gate's poll: each member's state and log lines, and (when due) a probe of rank 0."""
ANSWER_SECONDS = 10.0
"""The longest a probe waits for its completion before the gate watches for wedges (a spec without wedge_seconds)."""


@dataclass(frozen=True)
class Probe:
    """One probe's reading."""

    sent: float
    """time.time() when it was sent."""
    answer: str
    """The end of what the completion printed, then ` HTTP<code>`."""
    live: int | None
    """The liveness route's HTTP status (None: no answer)."""
    seconds: float
    """How long the completion could take."""

    @property
    def code(self) -> int | None:
        _, code = split_status(self.answer)
        return int(code) if code and code != "000" else None

    @property
    def answered(self) -> bool:
        return self.code == 200

    def how(self) -> str:
        """How an unanswered probe ended, in the supervisor's words (a wedge's `last`)."""
        answer = f"HTTP {self.code}" if self.code else f"no answer within {self.seconds:g} s"
        return f"{answer}, {LIVENESS_PATH} {self.live or 'no answer'}"


def answer_seconds(spec: ReadinessSpec) -> float:
    """How long one completion may take: a third of the wedge bound, at most ANSWER_SECONDS (a slow answer is one)."""
    bound = spec.get("wedge_seconds")
    return min(ANSWER_SECONDS, probe_seconds(bound)) if bound else ANSWER_SECONDS


def canary_seconds(spec: ReadinessSpec) -> float:
    """How long the gate's canary may take: REQUEST_SECONDS, or a third of a shorter wedge bound (a canary with no
    answer is the first unanswered probe of a start that may have wedged after its first answer)."""
    bound = spec.get("wedge_seconds")
    return min(REQUEST_SECONDS, probe_seconds(bound)) if bound else REQUEST_SECONDS


def probe_script(spec: ReadinessSpec, seconds: float) -> str:
    """On the head: the completion against rank 0 at the address the head reaches it (loopback when the API listens
    on every address, so no port needs to be open outside), then its liveness route; LIVE<code> first."""
    curl = completion_command(
        spec["address"], spec["port"], serving_request(spec["model"]), spec["api_key"] or None, seconds
    )
    live = f"curl -sS -m 5 -o /dev/null -w '%{{http_code}}' http://{spec['address']}:{int(spec['port'])}{LIVENESS_PATH}"
    return (
        f"out=$({curl} 2>&1) || true\nlive=$({live} 2>/dev/null) || true\n"
        f'echo "{LIVE_PREFIX}$live"\necho "$out" | tail -c 300\n'
    )


def parse_probe(output: str, sent: float, seconds: float) -> Probe:
    first, _, rest = output.strip().partition("\n")
    code = first.removeprefix(LIVE_PREFIX).strip() if first.startswith(LIVE_PREFIX) else ""
    live = int(code) if code.isdigit() and code != "000" else None
    return Probe(sent, rest.strip(), live, seconds)


def ask(head: SshHost, spec: ReadinessSpec) -> Probe:
    seconds = answer_seconds(spec)
    sent = time.time()
    return parse_probe(run_script(head, probe_script(spec, seconds), timeout=seconds + 50), sent, seconds)


def wedge_watch(spec: ReadinessSpec) -> WedgeWatch | None:
    """The gate's wedge watch (None: a spec written before the gate watched for wedges)."""
    bound = spec.get("wedge_seconds")
    return WedgeWatch(float(bound), asked(spec["model"])) if bound else None


def note(watch: WedgeWatch | None, probe: Probe, answered_before: bool) -> str | None:
    """Feed the watch one probe; why the start is wedged (None: it is not, or not yet). Before rank 0's first answer
    only a probe while it says it is up counts (a start still loading is no wedge); after it, every one."""
    if watch is None:
        return None
    if probe.answered:
        watch.answered(probe.sent)
        return None
    counts = answered_before or unanswered_while_live(probe.live, probe.code)
    watch.not_answered(probe.sent, counts, probe.how())
    return watch.verdict(time.time())
