"""Why a start failed, in words: the gate's members, every node's last log lines (the API key redacted) and the
message for each way a start fails (spark_llm.remote.readiness; spark_llm.remote.after_answer)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from spark_llm.group.logs import logs_command
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.observation import EngineState
from spark_llm.plan.start.phases import NodeStart
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import RemoteError
from spark_llm.remote.start_watch import Stall

LOG_LINES = 30


@dataclass(frozen=True)
class Member:
    name: str
    role: str
    ssh: SshHost
    script_path: str
    fabric_address: str = ""


def redact(text: str, secret: str | None) -> str:
    """An engine may log its own arguments (the key included): errors and progress never show it."""
    return text.replace(secret, "[spark-llm:apiKey]") if secret else text


def log_tails(members: list[Member], container: str) -> dict[str, str]:
    tails = {}
    for m in members:
        try:
            text = run_script(m.ssh, f"{logs_command(container, tail=LOG_LINES)} || true\n", timeout=60)
        except RemoteError as err:
            text = f"(could not read the log: {str(err).splitlines()[0]})"
        tails[m.name] = text.rstrip()
    return tails


def redacted_tails(members: list[Member], container: str, key: str | None) -> dict[str, str]:
    return {name: redact(text, key) for name, text in log_tails(members, container).items()}


def logs_text(members: list[Member], tails: dict[str, str]) -> str:
    return "\n".join(f"---- {m.name} ({m.role}): last {LOG_LINES} lines ----\n{tails[m.name]}" for m in members)


def relayed_from(members: list[Member], failed: Member, tail: str) -> list[Member]:
    """Other members whose lines the failed member's log carries.

    With Ray the driver (the head) relays every actor's output tagged `(Actor pid=N, ip=ADDR)` and re-raises a
    remote error as `ray::Actor.method() (pid=N, ip=ADDR, ...)`: a worker's crash ends the head's container while
    the worker's own container runs on. Naming that worker points at the real culprit.
    """
    return [
        m
        for m in members
        if m is not failed and m.fabric_address and re.search(rf"\bip={re.escape(m.fabric_address)}(?![\d.])", tail)
    ]


def exited_message(
    members: list[Member], failed: Member, state: str, tails: dict[str, str], when: str = "while the group was starting"
) -> str:
    lines = [f"{failed.name} ({failed.role}): engine container is {state} {when}."]
    for m in relayed_from(members, failed, tails[failed.name]):
        lines.append(
            f"{failed.name}'s log carries lines from {m.name} (ip={m.fabric_address}), relayed by Ray:"
            f" look there for the first error."
        )
    lines += [
        logs_text(members, tails),
        "Fix the cause (the log above), then run `pulumi up` again: the group restarts in order.",
    ]
    return "\n".join(lines)


def waited_message(
    members: list[Member],
    culprit: Member,
    start: NodeStart,
    now: float,
    failed: Member,
    state: str,
    why: str,
    tails: dict[str, str],
) -> str:
    """A member died of waiting for another (its engine's own timeout ran out): the one it waited for comes first."""
    spec = start.spec
    title = spec.title if spec else "its start (no phase line yet)"
    silent = start.silent_for(now)
    quiet = f"no new engine log line for {silent:.0f} s" if silent is not None else "no engine log line at all"
    lines = [
        f"{culprit.name} ({culprit.role}): the start hung in {title}: {quiet}; {failed.name}'s engine container is"
        f" {state}: it stopped waiting for the group to form ({why}).",
    ]
    if spec is not None:
        lines.append(f"What usually causes a stall in {title}: {spec.stall_hint}.")
    lines += [
        logs_text(members, tails),
        "Fix the cause (the log above), then run `pulumi up` again: the group restarts in order.",
    ]
    return "\n".join(lines)


class GroupNotReadyError(RuntimeError):
    """The group did not become ready; the message says which node and carries every node's log tail."""

    served_before: bool = False
    """The revision that failed is the one whose start served last: no rollback brings anything else back."""


def state_text(state: EngineState) -> str:
    if state.status == "exited":
        return f"exited (exit code {state.exit_code}{', killed for memory' if state.oom_killed else ''})"
    return state.status


def stall_message(members: list[Member], stall: Stall, tails: dict[str, str]) -> str:
    return "\n".join(
        [
            f"{stall.member}: the start stalled in {stall.title}: no new engine log line for {stall.silent:.0f} s"
            f" (bound {stall.bound:.0f} s; spark-llm:timeouts.stallSeconds sets it).",
            f"What usually causes a stall in {stall.title}: {stall.hint}.",
            logs_text(members, tails),
            "The group was left as it is for a look (`spark-llm logs`); fix the cause, then run `pulumi up` again:"
            " the group restarts in order.",
        ]
    )


def wedged_message(
    members: list[Member], head: Member, why: str, answered: bool, tails: dict[str, str], when: str = ""
) -> str:
    """A start whose rank 0 is up (or answered once) and answers nothing for the wedge bound: a failed start.
    `when`: what leads the sentence (default: `after its first answer, ` when it answered once)."""
    when = when or ("after its first answer, " if answered else "")
    return "\n".join(
        [
            f"{head.name} ({head.role}): {when}the start is {why}.",
            "A start that stops answering is a failed one (spark-llm:supervisor.wedgeSeconds bounds the wait): a hung"
            " NCCL collective or scheduler of this revision; the log below shows where each rank stopped.",
            logs_text(members, tails),
            "Fix the cause (the log above), then run `pulumi up` again: the group restarts in order.",
        ]
    )


def fallback_failure(problems: str) -> str:
    """A start that serves on the wrong transport: what is wrong first (the failure record keeps the first line)."""
    return (
        f"{problems}\n"
        "The group serves, over a fraction of the fabric's speed. Fix the cause, then `spark-llm restart` (or `pulumi"
        " up` after a config change): the group restarts in order. To serve on sockets anyway: `pulumi config set"
        " --path spark-llm:network.fabricProof warn`."
    )
