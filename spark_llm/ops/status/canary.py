"""`spark-llm status`'s canary: the fixed completion asked now against the one the readiness gate recorded.

The record is looked up for the revision the head runs (spark_llm.group.canary.recorded_canary) in the head's history
of starts and the stack's `start_timeline` output. A different answer, node set or revision is a failure that
shows both sides; no record (a group started before spark-llm recorded canaries) is a note, not a failure; the
canary is not asked when the group is not in sync (its verdict already fails and says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from spark_llm.group.canary import CanaryRecord, changes, describe, recorded_canary
from spark_llm.group.history import StartRecord
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.remote.canary import CanaryAsk


@dataclass(frozen=True)
class CanaryCheck:
    """The canary's verdict in `spark-llm status`: `ok` False only for a change (or no answer now)."""

    ok: bool
    note: str
    recorded: CanaryRecord | None = None
    now: CanaryRecord | None = None
    changed: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "note": self.note,
            "changes": self.changed,
            "recorded": self.recorded.to_json() if self.recorded else None,
            "now": self.now.to_json() if self.now else None,
        }


def judge(recorded: CanaryRecord | None, now: CanaryRecord | None) -> CanaryCheck:
    """Pure: the canary's verdict from the record and the answer now (None: not asked)."""
    if now is None:
        return CanaryCheck(True, "not asked: the group is not in sync (above)", recorded)
    if now.error:
        return CanaryCheck(False, f"no answer now: {now.error}", recorded, now, ["answer"])
    if recorded is None:
        return CanaryCheck(
            True,
            "no canary recorded at readiness (the group started before spark-llm recorded one); "
            "the next `pulumi up` that starts the group records it",
            None,
            now,
        )
    if recorded.error:
        return CanaryCheck(True, f"the readiness gate recorded no answer ({recorded.error})", recorded, now)
    found = changes(recorded, now)
    if found:
        return CanaryCheck(False, f"changed since readiness: {', '.join(found)}", recorded, now, found)
    return CanaryCheck(True, "the same answer as at readiness", recorded, now)


def canary_ask(plan: DeploymentPlan, revision: str, running: Sequence[str]) -> CanaryAsk:
    """What to ask of `plan`'s group now (`running`: the nodes whose engine runs, compared with the record's)."""
    return CanaryAsk(plan.api_address, plan.port, plan.model_name, plan.api_key, revision, tuple(running))


def check_canary(revision: str, history: Sequence[StartRecord], outputs: dict, now: CanaryRecord | None) -> CanaryCheck:
    """Judge the canary asked now (None: not asked, the group not being in sync) against the record for
    `revision` (the head's) in the head's history and the stack's `start_timeline` output."""
    if now is None:
        return judge(None, None)
    timeline = outputs.get("start_timeline")
    recorded = recorded_canary(revision, [*history, *([timeline] if isinstance(timeline, dict) else [])])
    return judge(recorded, now)


def canary_lines(check: CanaryCheck) -> list[str]:
    """Pure: the status lines: one when all is well; both answers (and what answered) on a change."""
    if check.ok and check.recorded is not None and check.now is not None and not check.recorded.error:
        # Both times, each named: the one of this check alone read as if it were readiness's (issue 31, 10).
        now = check.now
        return [
            f"canary: {check.note} of {check.recorded.at or '?'}: {now.answer!r} (revision {now.revision[:12] or '?'},"
            f" nodes {', '.join(now.nodes) or '?'}; asked again at {now.at or '?'})"
        ]
    lines = [f"canary: {check.note}"]
    if check.recorded is not None:
        lines.append(f"  recorded at readiness: {describe(check.recorded)}")
    if check.now is not None:
        lines.append(f"  now:                   {describe(check.now)}")
    if not check.ok:
        lines.append(
            "  The group answers a fixed prompt (temperature 0) differently from when it started: a changed model"
            " file, image, engine flag or GPU state that still serves. `spark-llm restart` records a new canary"
            " once the cause is fixed or accepted."
        )
    return lines
