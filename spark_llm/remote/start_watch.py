"""The group's start, watched: each member's new log lines at every poll, read into phases (spark_llm.plan.
start_phases), a progress line per node as phases pass and every PROGRESS_SECONDS, and a stall named as soon as a
phase goes quiet for longer than its bound.

One ssh session per member and poll (all members at once), over the node's master connection: the container's
state (the one probe, scripts/lib/engine_state.sh) and the log lines docker holds since the last one seen
(`docker logs -t --since`: the container's own write times, so no line is read twice). A line's time for a stall is
when this machine first received it: node clocks need not agree with this one.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from spark_llm.group.logs import logs_command
from spark_llm.group.times import docker_time, later
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.observation import ENGINE_STATE_FUNCTION, EngineState, parse_engine
from spark_llm.plan.start.phases import LogLine, NodeStart, phases_for, read_start
from spark_llm.plan.start.rendezvous import SHARE, TORCH_NCCL_TIMEOUT_SECONDS, WAITING_PHASES, capped_bound
from spark_llm.remote.runner import run

PROGRESS_SECONDS = 10.0
LAST_LINE_CHARS = 110
# An HTTP access line (uvicorn's, the stand-in's): a client's request says nothing of the start's progress, and
# counting it would keep a stalled start from ever looking quiet (the readiness gate itself asks every poll).
ACCESS_LINE = re.compile(r'"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) \S* HTTP/[\d.]+" \d{3}')
# Lines read a poll at most (a progress bar can print thousands between two polls; the newest are what matter).
POLL_LINES = 2000


@dataclass
class MemberLog:
    """One member's container and the lines of its log read so far (each with its first receive time)."""

    name: str
    role: str
    ssh: SshHost
    profile: str
    container: str
    lines: list[LogLine] = field(default_factory=list)
    cursor: str = ""
    """The docker write time (RFC 3339, nanoseconds) of the newest line read; the next poll reads from there."""
    seen_at_cursor: int = 0
    """How many lines written at exactly `cursor` were read (`--since` includes that instant again)."""
    container_id: str = ""
    engine: EngineState = field(default_factory=lambda: EngineState("absent"))
    reported: tuple[str | None, bool] = (None, False)
    last_progress: float = 0.0

    @property
    def head(self) -> bool:
        return self.role == "head"

    def start(self) -> NodeStart:
        return read_start(self.profile, self.lines, head=self.head)


def poll_script(member: MemberLog) -> str:
    """Pure: the member's state line, then `log<TAB>TIME TEXT` for each line since the cursor."""
    return (
        ENGINE_STATE_FUNCTION
        + f"engine_state {shlex.quote(member.container)} || exit 0\n"
        + "printf 'now\\t%s\\n' \"$(date +%s.%N)\"\n"
        + logs_command(member.container, since=member.cursor or "0", timestamps=True)
        + f" | tail -n {POLL_LINES}"
        # A progress bar rewrites its line with \r: its last state is the line (this end reads text with universal
        # newlines, where a \r would split it).
        + " | sed -e 's/^\\([^ ]*\\) .*\\r/\\1 /' -e 's/^/log\\t/' || true\n"
    )


def take(member: MemberLog, output: str, received: float) -> None:
    """Pure but for `member`: fold one poll's output into it (a new container starts its log afresh)."""
    fresh: list[tuple[str, str]] = []
    node_now: float | None = None
    for line in output.split("\n"):  # not splitlines(): a progress bar's \r is inside its line
        section, _, value = line.partition("\t")
        if section == "now":
            try:
                node_now = float(value)
            except ValueError:
                node_now = None
        elif section == "engine":
            member.engine = parse_engine(value)
        elif section == "docker":
            member.engine = EngineState(f"unknown (its Docker engine does not answer: {value.strip()})")
        elif section == "log":
            stamp, _, text = value.partition(" ")
            fresh.append((stamp, text))
    if member.engine.container_id != member.container_id:
        member.container_id, member.lines, member.cursor, member.seen_at_cursor = member.engine.container_id, [], "", 0
    skip = member.seen_at_cursor  # lines at the cursor's instant were read last time
    for stamp, text in fresh:
        if _before(stamp, member.cursor) or (stamp == member.cursor and skip > 0):
            skip -= stamp == member.cursor
            continue
        if stamp == member.cursor:
            member.seen_at_cursor += 1
        else:
            member.cursor, member.seen_at_cursor = stamp, 1
        if ACCESS_LINE.search(text):
            continue
        # A progress bar rewrites its line with \r: the last state is the line.
        member.lines.append(LogLine(text.rsplit("\r", 1)[-1], _local_time(stamp, node_now, received)))


def _before(stamp: str, cursor: str) -> bool:
    """A line's stamp is before the cursor's, as times (Docker trims trailing zeros: strings do not sort so)."""
    return bool(cursor) and later(cursor, stamp)


def _local_time(stamp: str, node_now: float | None, received: float) -> float:
    """When a line was written, on this machine's clock: its age on the node's clock (docker's write time against
    the node's own `date` in the same poll) taken from the receive time. A line written before the gate's first
    poll is that old, not new; no clock needs to agree with another."""
    if node_now is None:
        return received
    written = docker_time(stamp)
    if written is None:
        return received
    return received - min(max(node_now - written, 0.0), 86400.0)


def poll(members: list[MemberLog]) -> None:
    """Every member's state and new lines, all at once (an unreachable member keeps what it had)."""

    def one(member: MemberLog) -> None:
        result = run(member.ssh, poll_script(member), timeout=60, multiplex=True)
        if result.ok:
            take(member, result.stdout, time.time())
        else:
            why = (result.stderr.strip().splitlines() or [f"exit {result.code}"])[-1]
            member.engine = EngineState(f"unreachable ({why})")

    with ThreadPoolExecutor(max_workers=len(members)) as pool:
        list(pool.map(one, members))


def short(line: str | None) -> str:
    text = " ".join((line or "").split())
    return text if len(text) <= LAST_LINE_CHARS else text[: LAST_LINE_CHARS - 3] + "..."


def progress(member: MemberLog, start: NodeStart, now: float, say: Callable[[str], None]) -> None:
    """A line when the member's phase changes, and every PROGRESS_SECONDS while it stays."""
    state = (start.phase, start.done)
    changed = state != member.reported
    if not changed and now - member.last_progress < PROGRESS_SECONDS:
        return
    member.reported, member.last_progress = state, now
    if start.done:
        if changed:
            say(f"[{member.name}] started: {timeline_text(start)}")
        return
    if start.phase is None:
        say(f"[{member.name}] starting (no phase line yet): {short(start.last_line)}")
        return
    spec = start.spec
    title = spec.title if spec else start.phase
    done = f" (after {timeline_text(start)})" if changed and start.finished else ""
    say(f"[{member.name}] {title} {start.in_phase_for(now) or 0:.0f} s{done}: {short(start.last_line)}")


def timeline_text(start: NodeStart) -> str:
    titles = {spec.name: spec.title for spec in start.phases}
    return ", ".join(f"{titles.get(name, name)} {seconds:.1f} s" for name, seconds in start.timeline().items()) or "-"


@dataclass(frozen=True)
class Stall:
    member: str
    phase: str
    title: str
    silent: float
    bound: float
    hint: str


def stall_bound(
    profile: str,
    phase: str,
    *,
    head: bool,
    override: float | None,
    history: list[dict],
    rendezvous: float | None = None,
) -> float:
    """Pure: how long `phase` may go without a new line: the stack's one bound if set; else the phase's default, or
    twice the longest this phase has taken in this stack's earlier starts when that is longer, and in a phase where
    every member waits, at most half the engine's own timeout (`rendezvous`: spark_llm.plan.start.rendezvous)."""
    if override:
        return float(override)
    spec = next(s for s in phases_for(profile, head=head) if s.name == phase)
    longest = max((float(h.get(phase, 0.0)) for h in history), default=0.0)
    return capped_bound(phase, max(spec.stall_seconds, 2 * longest), rendezvous)


def stalled(
    member: MemberLog,
    start: NodeStart,
    now: float,
    override: float | None,
    history: list[dict],
    rendezvous: float | None = None,
) -> Stall | None:
    """Pure: the member's stall, if its current phase has been quiet past its bound."""
    spec, silent = start.spec, start.silent_for(now)
    if spec is None or silent is None:
        return None
    bound = stall_bound(
        member.profile, spec.name, head=member.head, override=override, history=history, rendezvous=rendezvous
    )
    if silent <= bound:
        return None
    return Stall(member.name, spec.name, spec.title, silent, bound, spec.stall_hint)


def first_stopped(logs: list[MemberLog]) -> MemberLog | None:
    """Pure: of the members whose container is not running, the one that stopped first (Docker's FinishedAt; rank
    order when the times do not tell): the others usually stopped because of it."""
    stopped = [log for log in logs if log.engine.status != "running"]
    if not stopped:
        return None
    order = {id(log): i for i, log in enumerate(logs)}
    return min(stopped, key=lambda log: (docker_time(log.engine.finished_at) or float("inf"), order[id(log)]))


def waited_for(
    failed: MemberLog, logs: list[MemberLog], now: float, rendezvous: float | None
) -> tuple[MemberLog, NodeStart] | None:
    """Pure: the member `failed` most likely died of waiting for (issue 31, 4): when it stopped in a phase where every
    member waits (spark_llm.plan.start.rendezvous.WAITING_PHASES) after waiting there long enough for its engine's
    own timeout (`rendezvous`) to be the cause, a running member that has not got past that phase, quiet the
    longest. None when the stop was not a wait (a crash in that phase stops it at once, with its own traceback)."""
    phase = failed.start().phase
    # How long its container lived (Docker's StartedAt and FinishedAt, both the node's clock): a wait that ended in
    # the engine's timeout lasted at least that long, a crash did not.
    began, ended = docker_time(failed.engine.started_at), docker_time(failed.engine.finished_at)
    if phase not in WAITING_PHASES or began is None or ended is None:
        return None
    if ended - began < (rendezvous or TORCH_NCCL_TIMEOUT_SECONDS) * SHARE:
        return None
    waiting = []
    for log in logs:
        if log is failed or log.engine.status != "running":
            continue
        start = log.start()
        if start.done or (start.phase is not None and start.phase != phase):
            continue
        waiting.append((start.silent_for(now) or 0.0, log, start))
    if not waiting:
        return None
    _, log, start = max(waiting, key=lambda entry: entry[0])
    return log, start
