"""The readiness gate: `pulumi up` ends when rank 0 generates a token, not when containers started.

While it waits it watches every member of the group (spark_llm.remote.start_watch): if any engine container exits,
the wait ends at once with the last log lines of every node in the error, so a worker crash at init is reported as
itself instead of as a head that hangs at "Init torch distributed begin" (what the seeds saw after "Worker
launched"). Each node's start phases show as they pass, and a phase that goes quiet past its bound ends the wait
naming the node, the phase and what usually causes it, long before `timeouts.readySeconds`, which is the ceiling.
When rank 0 answers, the start's timeline (seconds per phase per node, and the canary: a fixed completion at
temperature 0) is printed as the last line and appended to the head's history of starts, from which later starts'
stall bounds learn; a failed start is a line there too.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from spark_llm.group.history import StartRecord, failure_record, succeeded
from spark_llm.group.logs import logs_command
from spark_llm.group.wedge import WedgeWatch
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.observation import EngineState
from spark_llm.plan.readiness import ReadinessSpec
from spark_llm.plan.start.phases import NodeStart
from spark_llm.plan.start.timeline import phase_seconds
from spark_llm.plan.weights.steps import VERSIONS_DIR, stored_digest_command
from spark_llm.remote import gate_probe
from spark_llm.remote.canary import gate_canary
from spark_llm.remote.fabric_proof import Rank, prove_fabric
from spark_llm.remote.history import append_history, read_history
from spark_llm.remote.host_record import changes_since_served, record_hosts
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import RemoteError
from spark_llm.remote.start_watch import MemberLog, Stall, first_stopped, poll, progress, stalled, waited_for

POLL_SECONDS = 2.0
LOG_LINES = 30


@dataclass(frozen=True)
class Member:
    name: str
    role: str
    ssh: SshHost
    script_path: str
    fabric_address: str = ""


def _members(props: ReadinessSpec) -> list[Member]:
    return [
        Member(m["name"], m["role"], SshHost.from_props(m["connection"]), m["script_path"], m["fabric_address"])
        for m in props["members"]
    ]


def redact(text: str, secret: str | None) -> str:
    """An engine may log its own arguments (the key included): errors and progress never show it."""
    return text.replace(secret, "[spark-llm:apiKey]") if secret else text


def _log_tails(members: list[Member], container: str) -> dict[str, str]:
    tails = {}
    for m in members:
        try:
            text = run_script(m.ssh, f"{logs_command(container, tail=LOG_LINES)} || true\n", timeout=60)
        except RemoteError as err:
            text = f"(could not read the log: {str(err).splitlines()[0]})"
        tails[m.name] = text.rstrip()
    return tails


def _redacted_tails(members: list[Member], container: str, key: str | None) -> dict[str, str]:
    return {name: redact(text, key) for name, text in _log_tails(members, container).items()}


def _logs(members: list[Member], tails: dict[str, str]) -> str:
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


def exited_message(members: list[Member], failed: Member, state: str, tails: dict[str, str]) -> str:
    lines = [f"{failed.name} ({failed.role}): engine container is {state} while the group was starting."]
    for m in relayed_from(members, failed, tails[failed.name]):
        lines.append(
            f"{failed.name}'s log carries lines from {m.name} (ip={m.fabric_address}), relayed by Ray:"
            f" look there for the first error."
        )
    lines += [
        _logs(members, tails),
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
        _logs(members, tails),
        "Fix the cause (the log above), then run `pulumi up` again: the group restarts in order.",
    ]
    return "\n".join(lines)


def served_weights(members: list[Member], path: str, keep_versions: bool = False) -> str:
    """At a start that serves: drop the versions every node kept for a rollback (scripts/manifest.py keep: this
    start serves, so the version before it is no longer the one to go back to), unless it is a rollback's own start
    (`keep_versions`: the good version stays kept until a newer start serves), then the head's manifest digest,
    which the history records with the start ("" when it cannot be read)."""
    drop = f"rm -rf {shlex.quote(f'{path}/{VERSIONS_DIR}')}\n"
    for m in [] if keep_versions else members:
        try:
            run_script(m.ssh, drop, timeout=60)
        except RemoteError:
            pass  # a node that cannot be reached now keeps its hard links: they cost no bytes
    head = next(m for m in members if m.role == "head")
    try:
        return run_script(head.ssh, stored_digest_command(path), timeout=60).strip()
    except RemoteError:
        return ""


class GroupNotReadyError(RuntimeError):
    """The group did not become ready; the message says which node and carries every node's log tail."""

    served_before: bool = False
    """The revision that failed is the one whose start served last: no rollback brings anything else back."""


def _state_text(state: EngineState) -> str:
    if state.status == "exited":
        return f"exited (exit code {state.exit_code}{', killed for memory' if state.oom_killed else ''})"
    return state.status


def stall_message(members: list[Member], stall: Stall, tails: dict[str, str]) -> str:
    return "\n".join(
        [
            f"{stall.member}: the start stalled in {stall.title}: no new engine log line for {stall.silent:.0f} s"
            f" (bound {stall.bound:.0f} s; spark-llm:timeouts.stallSeconds sets it).",
            f"What usually causes a stall in {stall.title}: {stall.hint}.",
            _logs(members, tails),
            "The group was left as it is for a look (`spark-llm logs`); fix the cause, then run `pulumi up` again:"
            " the group restarts in order.",
        ]
    )


def wedged_message(members: list[Member], head: Member, why: str, answered: bool, tails: dict[str, str]) -> str:
    """A start whose rank 0 is up (or answered once) and answers nothing for the wedge bound: a failed start."""
    when = "after its first answer, " if answered else ""
    return "\n".join(
        [
            f"{head.name} ({head.role}): {when}the start is {why}.",
            "A start that stops answering is a failed one (spark-llm:supervisor.wedgeSeconds bounds the wait): a hung"
            " NCCL collective or scheduler of this revision; the log below shows where each rank stopped.",
            _logs(members, tails),
            "Fix the cause (the log above), then run `pulumi up` again: the group restarts in order.",
        ]
    )


def _ranks(members: list[Member]) -> list[Rank]:
    return [Rank(m.name, m.role, m.ssh, m.fabric_address) for m in members]


def fallback_failure(problems: str) -> str:
    """A start that serves on the wrong transport: what is wrong first (the failure record keeps the first line)."""
    return (
        f"{problems}\n"
        "The group serves, over a fraction of the fabric's speed. Fix the cause, then `spark-llm restart` (or `pulumi"
        " up` after a config change): the group restarts in order. To serve on sockets anyway: `pulumi config set"
        " --path spark-llm:network.fabricProof warn`."
    )


def settle(
    spec: ReadinessSpec,
    members: list[Member],
    logs: list[MemberLog],
    watch: WedgeWatch | None,
    say: Callable,
    canary_sent: float,
) -> None:
    """After rank 0 answered once and then not the canary: probe until it answers again (the start stands), a member
    stops, or the wedge bound passes with no answer (GroupNotReadyError, wedged)."""
    if watch is None:
        return
    head = next(m for m in members if m.role == "head")
    key = spec["api_key"] or None
    say(f"[{head.name}] no answer to the canary: asking again, for up to {watch.bound:g} s (supervisor.wedgeSeconds)")
    watch.not_answered(canary_sent, True, "no answer to the canary")
    while True:
        poll(logs)
        stopped = first_stopped(logs)
        if stopped is not None:
            failed = next(m for m in members if m.name == stopped.name)
            tails = _redacted_tails(members, spec["container"], key)
            raise GroupNotReadyError(exited_message(members, failed, _state_text(stopped.engine), tails))
        probe = gate_probe.ask(head.ssh, spec)
        if probe.answered:
            say(f"[{head.name}] rank 0 answers again")
            return
        if wedged := gate_probe.note(watch, probe, answered_before=True):
            raise GroupNotReadyError(
                wedged_message(members, head, wedged, True, _redacted_tails(members, spec["container"], key))
            )
        time.sleep(POLL_SECONDS)


def wait_ready(spec: ReadinessSpec, *, say: Callable[[str], None]) -> StartRecord:
    """`watch_start`; a start that fails is a line of the head's history too (what `pulumi preview` and
    `spark-llm status` say of the revision afterwards: spark_llm.group.history.failure_record)."""
    try:
        return watch_start(spec, say=say)
    except GroupNotReadyError as err:
        if not spec["history_path"]:
            raise
        members = _members(spec)
        head = next(m for m in members if m.role == "head")
        # What changed on the hosts since the last start that served: the first suspect of a start that fails now
        # (read before this failure joins the history; a node that cannot be read now only leaves it unsaid).
        try:
            history = read_history(head.ssh, spec["history_path"])
            probe = spec.get("host_probe", "")
            changed = changes_since_served(_ranks(members), probe, history) if probe else ""
        except RemoteError:
            history, changed = [], ""
        served = succeeded(history)
        same = bool(served) and served[-1].get("revision") == spec["revision"]
        reason = redact(str(err).splitlines()[0], spec["api_key"] or None)
        at = datetime.now(UTC).isoformat(timespec="milliseconds")
        failure = failure_record(spec["revision"], spec["profile"], reason, at)
        append_history(head.ssh, spec["history_path"], failure)
        if changed:
            err = GroupNotReadyError(f"{err}\n{changed}")
        err.served_before = same
        raise err from None


def watch_start(spec: ReadinessSpec, *, say: Callable[[str], None]) -> StartRecord:
    """Poll until rank 0 generates; raise GroupNotReadyError as soon as any member's container is not running or a
    member's start phase stalls. Returns the start's timeline (what TIMELINE_PREFIX prints).

    `spec`: spark_llm.plan.readiness.ReadinessSpec.
    """
    members = _members(spec)
    head = next(m for m in members if m.role == "head")
    key = spec["api_key"] or None
    profile = spec["profile"]
    container = spec["container"]
    logs = [MemberLog(m.name, m.role, m.ssh, profile, container) for m in members]
    history_path = spec["history_path"]
    # A failed start's phases say nothing of how long a phase may take: the bounds learn from successful ones.
    history = [
        h
        for h in succeeded(read_history(head.ssh, history_path) if history_path else [])
        if h.get("profile") == profile
    ]
    override = spec["stall_seconds"] or None
    deadline = time.monotonic() + float(spec["timeout"])
    start = time.monotonic()
    rendezvous = spec["rendezvous_seconds"] or None
    watch = gate_probe.wedge_watch(spec)
    by_name = {m.name: m for m in members}
    ranks = _ranks(members)
    while True:
        poll(logs)
        now = time.time()
        stopped = first_stopped(logs)
        if stopped is not None:
            tails = _redacted_tails(members, container, key)
            failed, state = by_name[stopped.name], _state_text(stopped.engine)
            waits = waited_for(stopped, logs, now, rendezvous)
            if waits is None:
                raise GroupNotReadyError(exited_message(members, failed, state, tails))
            culprit, culprit_start = waits
            why = spec["rendezvous_source"] or "the engine's own timeout"
            raise GroupNotReadyError(
                waited_message(members, by_name[culprit.name], culprit_start, now, failed, state, why, tails)
            )
        stalls = []
        for log in logs:
            started = log.start()
            progress(log, started, now, lambda line: say(redact(line, key)))
            earlier = [phase_seconds(h, log.name) for h in history]
            found = stalled(log, started, now, override, earlier, rendezvous)
            if found is not None:
                stalls.append(found)
        if stalls:
            # The member quiet the longest went quiet first: the others usually wait for it (a rendezvous).
            first = max(stalls, key=lambda stall: stall.silent)
            tails = _redacted_tails(members, container, key)
            raise GroupNotReadyError(stall_message(members, first, tails))
        probe = gate_probe.ask(head.ssh, spec)
        if wedged := gate_probe.note(watch, probe, answered_before=False):
            tails = _redacted_tails(members, container, key)
            raise GroupNotReadyError(wedged_message(members, head, wedged, False, tails))
        if probe.answered:
            waited = round(time.monotonic() - start, 1)
            # The lines since this round's read: on a busy machine rank 0's last phase line and its first answer fell
            # in one round, and its `started:` line with the whole timeline was never said.
            poll(logs)
            for log in logs:
                progress(log, log.start(), time.time(), lambda line: say(redact(line, key)))
            say(f"[{head.name}] ready: rank 0 generated a token after {waited} s")
            fabric = spec.get("fabric")
            proof = (
                prove_fabric(
                    ranks,
                    container,
                    tuple(fabric["roce_devices"]),
                    lambda line: say(redact(line, key)),
                )
                if fabric
                else None
            )
            if proof is not None and proof.problems:
                if fabric and fabric["on_fallback"] == "fail":
                    raise GroupNotReadyError(fallback_failure(proof.problems))
                for line in proof.problems.splitlines():
                    say(f"warning (spark-llm:network.fabricProof warn): {line}")
            canary_sent = time.time()
            timeline: StartRecord = {
                "revision": spec["revision"],
                "profile": profile,
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
                "gate_seconds": waited,
                # A list per node: the phases' order survives JSON objects (Pulumi sorts an output's keys).
                "nodes": {
                    log.name: [
                        {"phase": name, "seconds": round(sec, 2)} for name, sec in log.start().timeline().items()
                    ]
                    for log in logs
                },
                # The fixed completion at temperature 0 that `spark-llm status` asks again (spark_llm.group.canary).
                "canary": gate_canary(
                    spec,
                    head.ssh,
                    [m.name for m in members],
                    lambda line: say(redact(line, key)),
                    gate_probe.canary_seconds(spec),
                ),
            }
            if timeline["canary"].get("error"):
                # No answer to the canary right after the first one: a revision that answers once and then wedges
                # fails here, within the wedge bound, instead of passing and leaving the supervisor to restart into
                # the same wedge.
                settle(spec, members, logs, watch, say, canary_sent)
            if proof is not None:
                timeline["fabric"] = proof.records
            if spec.get("host_probe"):
                timeline["hosts"] = record_hosts(ranks, spec["host_probe"], container, proof.logs if proof else None)
            if spec["weights_path"]:
                timeline["weights"] = served_weights(members, spec["weights_path"], spec.get("keep_versions", False))
            if history_path:
                append_history(head.ssh, history_path, timeline)
            return timeline
        if time.monotonic() > deadline:
            raise GroupNotReadyError(
                f"rank 0 on {head.name} did not generate within {spec['timeout']} s (last answer: {probe.answer!r}).\n"
                f"{redact(_logs(members, _log_tails(members, container)), key)}\n"
                "Raise spark-llm:timeouts.readySeconds if the model needs longer to load, else fix the cause."
            )
        time.sleep(POLL_SECONDS)
