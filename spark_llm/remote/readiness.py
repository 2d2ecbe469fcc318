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

import shlex
import time
from collections.abc import Callable
from datetime import UTC, datetime

from spark_llm.group.history import StartRecord, failure_record, succeeded
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.readiness import ReadinessSpec
from spark_llm.plan.start.timeline import phase_seconds
from spark_llm.plan.weights.steps import VERSIONS_DIR, stored_digest_command
from spark_llm.remote import gate_probe
from spark_llm.remote.after_answer import probation, settle
from spark_llm.remote.canary import gate_canary
from spark_llm.remote.fabric_proof import Rank, prove_fabric
from spark_llm.remote.gate_failures import (
    GroupNotReadyError,
    Member,
    exited_message,
    fallback_failure,
    log_tails,
    logs_text,
    redact,
    redacted_tails,
    stall_message,
    state_text,
    waited_message,
    wedged_message,
)
from spark_llm.remote.history import append_history, read_history
from spark_llm.remote.host_record import changes_since_served, record_hosts
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import RemoteError
from spark_llm.remote.start_watch import MemberLog, first_stopped, poll, progress, stalled, waited_for


def _members(props: ReadinessSpec) -> list[Member]:
    return [
        Member(m["name"], m["role"], SshHost.from_props(m["connection"]), m["script_path"], m["fabric_address"])
        for m in props["members"]
    ]


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


def _ranks(members: list[Member]) -> list[Rank]:
    return [Rank(m.name, m.role, m.ssh, m.fabric_address) for m in members]


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
            tails = redacted_tails(members, container, key)
            failed, state = by_name[stopped.name], state_text(stopped.engine)
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
            tails = redacted_tails(members, container, key)
            raise GroupNotReadyError(stall_message(members, first, tails))
        probe = gate_probe.ask(head.ssh, spec)
        if wedged := gate_probe.note(watch, probe, answered_before=False):
            tails = redacted_tails(members, container, key)
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
            # A revision that crashes or stops answering a minute in fails here too, while its weights' kept version
            # is still on every node (served_weights drops it only after).
            probation(spec, members, logs, watch, say, probe.sent)
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
                f"{redact(logs_text(members, log_tails(members, container)), key)}\n"
                "Raise spark-llm:timeouts.readySeconds if the model needs longer to load, else fix the cause."
            )
        time.sleep(gate_probe.POLL_SECONDS)
