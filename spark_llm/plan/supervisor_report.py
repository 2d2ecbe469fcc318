"""Pure: what the stack's supervisor did, read back from its state file on the head (spark_llm.plan.supervisor
writes where it lives), for `spark-llm status` and `pulumi preview`."""

from __future__ import annotations

from dataclasses import dataclass

from spark_llm.group.records import IN_PROGRESS, GaveUp, RestartRecord, parse_state


@dataclass(frozen=True)
class SupervisorReport:
    """The supervisor's state file: its restarts (oldest first) and, when it gave up, when and why."""

    restarts: tuple[RestartRecord, ...]
    gave_up: GaveUp | None
    waiting: str | None

    @classmethod
    def parse(cls, text: str) -> SupervisorReport | None:
        data = parse_state(text)
        if data is None:
            return None
        restarts = tuple(r for r in data.get("restarts") or [] if isinstance(r, dict))
        gave_up = data.get("gave_up") if isinstance(data.get("gave_up"), dict) else None
        return cls(restarts, gave_up, data.get("waiting") or None)

    def lines(self) -> list[str]:
        """For `spark-llm status`: a line per restart, then the verdict when it gave up."""
        out = []
        for r in self.restarts:
            took = f" in {r['seconds_to_serving']} s" if r.get("seconds_to_serving") is not None else ""
            what = f"{r.get('reason', '?')} -> {r.get('result', '?')}{took}"
            out.append(f"supervisor restarted the group at {r.get('at', '?')}: {what}")
        if self.waiting:
            out.append(f"supervisor: {self.waiting}")
        if self.gave_up:
            out.append(self.gave_up_sentence())
        return out

    @property
    def restarting(self) -> RestartRecord | None:
        """The restart under way (its record says `in progress`), if any."""
        last = self.restarts[-1] if self.restarts else None
        return last if last is not None and last.get("result") == IN_PROGRESS else None

    def gave_up_sentence(self) -> str:
        assert self.gave_up is not None
        return (
            f"the supervisor gave up at {self.gave_up.get('at', '?')}: {self.gave_up.get('reason', '?')}; every member"
            " is stopped. Find the cause (`spark-llm logs`), fix it, then run `pulumi up`: it restarts the group and"
            " the supervisor"
        )

    def preview_warning(self) -> str | None:
        """What `pulumi preview`/`up` says of it (None: nothing happened)."""
        if self.gave_up:
            return (
                f"the supervisor gave up at {self.gave_up.get('at', '?')}: {self.gave_up.get('reason', '?')};"
                " `pulumi up` restarts the group"
            )
        if not self.restarts:
            return None
        last = self.restarts[-1]
        times = "once" if len(self.restarts) == 1 else f"{len(self.restarts)} times"
        return (
            f"the supervisor restarted the group {times}, last at {last.get('at', '?')}: {last.get('reason', '?')}"
            f" ({last.get('result', '?')})"
        )
