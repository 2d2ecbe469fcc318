"""Is the engine group whole? The one rule, for `pulumi preview`/`up`, `spark-llm status` and the supervisor.

The group is whole when every member's engine container runs, each is the deployment's own, all were started by
the same rollout, and no worker started after the head (a worker restarted alone rejoins nothing: the engines'
process group died with it). A caller passes a Policy for what only `pulumi up` can mend (a member absent, a node
that does not answer, a container someone else started): preview and status count it as a reason to restart the
group (`up` recreates it, in group.order), the supervisor waits for it (it can create nothing, and a node that does
not answer may be rebooting).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spark_llm.group.members import ABSENT, UNREACHABLE, Member
from spark_llm.group.times import docker_time_ns, later

# The exit code Docker records for a container it finds dead when it starts again (its node rebooted): the
# container's FinishedAt is then when that Docker engine started, at boot, long after the engine really stopped.
NODE_RESTARTED = 255

WHOLE = "whole"
BROKEN = "broken"
WAIT = "wait"


@dataclass(frozen=True)
class Policy:
    """What a caller does about a member only `pulumi up` can mend, and whether rollouts are compared."""

    missing: str
    """"restart": it breaks the group (preview, status); "wait": the verdict is WAIT (the supervisor)."""
    same_rollout: bool = True
    """Members must carry one rollout label (preview's generation); the supervisor knows its containers by ID."""


RESTART = Policy("restart")
SUPERVISE = Policy("wait", same_rollout=False)


@dataclass(frozen=True)
class Verdict:
    state: str
    """WHOLE, BROKEN or WAIT."""
    problems: tuple[str, ...] = ()
    """One phrase per thing that is wrong, in the culprits' order."""
    culprits: tuple[str, ...] = ()
    """The members at fault: the member that stopped first leads (the others usually died of waiting for it: a
    rank's process group ends when any rank leaves), then the rest in rank order."""

    @property
    def why(self) -> str:
        return "; ".join(self.problems)


def _missing(m: Member) -> str | None:
    """What only `pulumi up` can mend about `m`, in words (None: nothing)."""
    if m.status == UNREACHABLE:
        return f"{m.name} could not be read ({m.error or 'no answer'})"
    if m.status == ABSENT:
        return f"{m.name} has no engine container"
    if m.foreign:
        return f"{m.name}'s engine was started by {m.foreign}"
    return None


def _with_its_node(m: Member) -> bool:
    """Whether `m` stopped because its node went down (Docker found it dead at boot: NODE_RESTARTED)."""
    return not m.running and m.status not in (ABSENT, UNREACHABLE) and m.exit_code == NODE_RESTARTED


def _stopped_at(m: Member) -> int | None:
    if m.running or m.status in (ABSENT, UNREACHABLE) or _with_its_node(m):
        return None  # (a node's reboot: its FinishedAt is its boot's, not the engine's stop)
    return docker_time_ns(m.finished_at)


def _first_stopped(members: Sequence[Member]) -> str | None:
    """The member whose engine stopped first (None: none stopped, or their times are unknown). A member whose node
    went down leads: the others' ranks died of waiting for it, seconds before its node came back and recorded it."""
    downed = [m.name for m in members if _with_its_node(m)]
    if downed:
        return downed[0]
    stopped = [(at, i, m.name) for i, m in enumerate(members) if (at := _stopped_at(m)) is not None]
    return min(stopped)[2] if stopped else None


def _after_first(m: Member, members: Sequence[Member]) -> str:
    """`, 0.4 s after w1's` for a member that stopped after the first one did ("" for the first, or unknown)."""
    first = next((o for o in members if o.name == _first_stopped(members)), None)
    at, first_at = _stopped_at(m), _stopped_at(first) if first is not None else None
    if first is None or first.name == m.name or at is None or first_at is None:
        return ""
    return f", {(at - first_at) / 1e9:.1f} s after {first.name}'s"


def _stopped_phrase(m: Member, members: Sequence[Member]) -> str:
    oom = ", killed for memory" if m.oom_killed else ""
    code = "?" if m.exit_code is None else m.exit_code
    if _with_its_node(m):
        return (
            f"{m.name}'s engine container is {m.status} (exit code {code}: {m.name} went down, a reboot or power loss)"
        )
    return f"{m.name}'s engine container is {m.status} (exit code {code}{oom}{_after_first(m, members)})"


def judge(members: Sequence[Member], policy: Policy = RESTART, expected_rollout: str | None = None) -> Verdict:
    """The group's verdict. `members`: in rank order, the head first. `expected_rollout`: the rollout the config
    gives (status: the group revision), None to compare the members with each other only."""
    problems: list[tuple[str, str]] = []
    for m in members:
        missing = _missing(m)
        if missing is not None:
            if policy.missing == "wait":
                return Verdict(WAIT, (missing,), (m.name,))
            problems.append((m.name, missing))
        elif not m.running:
            problems.append((m.name, _stopped_phrase(m, members)))
        elif expected_rollout is not None and m.rollout != expected_rollout:
            problems.append(
                (m.name, f"{m.name} runs revision {m.rollout or '(none)'}, the config gives {expected_rollout}")
            )
    head = members[0] if members else None
    if head is not None and head.running and not _missing(head):
        for m in members[1:]:
            if m.running and not _missing(m) and later(m.started_at, head.started_at):
                problems.append((m.name, f"{m.name}'s engine container restarted after the head's"))
    rollouts = {m.rollout for m in members}
    if not problems and policy.same_rollout and expected_rollout is None and (len(rollouts) > 1 or "" in rollouts):
        problems.append(("", "the members' containers belong to different rollouts"))
    if not problems:
        return Verdict(WHOLE)
    first = _first_stopped(members)
    order = {m.name: i for i, m in enumerate(members)}
    problems.sort(key=lambda p: (p[0] != first, order.get(p[0], len(order))))
    culprits = tuple(dict.fromkeys(name for name, _ in problems if name))
    return Verdict(BROKEN, tuple(phrase for _, phrase in problems), culprits)
