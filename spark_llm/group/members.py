"""A member of the engine group as every caller sees it: its engine container's state, read one way.

Preview (spark_llm.plan.drift), `spark-llm status` and the supervisor on the head each read the containers their own
way (the program's probe, the operator's ssh, the head's Docker socket), then hand the verdict (group.verdict) the
same record. `from_inspect` reads what `docker inspect` and the probe's `engine_state` print.
"""

from __future__ import annotations

from dataclasses import dataclass

# What a member can be besides Docker's own states (running, exited, created, restarting, paused, dead).
ABSENT = "absent"
UNREACHABLE = "unreachable"


# OpenSSH's own advice on a changed host key names its known_hosts file (inside the supervisor's container, for the
# supervisor) and says to remove the pin: relayed by `spark-llm status`, it would have the operator drop a pin.
_HOST_KEY_REFUSED = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED")


def ssh_failure(node: str, stderr: str) -> str:
    """Pure: why ssh to `node` failed, in a line fit to relay: a refused host key in our words (keep the pin, check
    the node), anything else as ssh's last line."""
    if any(mark in stderr for mark in _HOST_KEY_REFUSED):
        return (
            f"{node}'s host key is not the pinned one (ssh refused it): if {node} was reinstalled on purpose, pin its"
            f" new key (spark-llm:nodes[].hostKey) and run `pulumi up`; otherwise find out who answers at its address"
        )
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "ssh failed")[-200:]


@dataclass(frozen=True)
class Member:
    """One member's engine container; members are passed in rank order, the head first."""

    name: str
    role: str
    """head or worker."""
    status: str
    """Docker's state (running, exited, ...), ABSENT (no such container) or UNREACHABLE (the node did not answer)."""
    exit_code: int | None = None
    started_at: str = ""
    """Docker's StartedAt (group.times reads it)."""
    finished_at: str = ""
    """Docker's FinishedAt: when a member that is not running stopped (the first to stop is the culprit)."""
    oom_killed: bool = False
    error: str = ""
    """Why the node could not be read (UNREACHABLE)."""
    rollout: str = ""
    """The label naming the rollout that started the container (the generation, or the group revision)."""
    foreign: str = ""
    """Who else started this container ("" when it is the deployment's own), e.g. `another state of this stack`."""

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def is_head(self) -> bool:
        return self.role == "head"


def from_inspect(name: str, role: str, state: dict, **extra: object) -> Member:
    """A member from a container's `State` as `docker inspect` prints it (Status, ExitCode, StartedAt, OOMKilled)."""
    return Member(
        name=name,
        role=role,
        status=str(state.get("Status", "unknown")),
        exit_code=int(state.get("ExitCode", 0)),
        started_at=str(state.get("StartedAt", "")),
        finished_at=str(state.get("FinishedAt", "")),
        oom_killed=bool(state.get("OOMKilled", False)),
        **extra,  # type: ignore[arg-type]
    )
