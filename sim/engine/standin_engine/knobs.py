"""Failure knobs read from the environment, so tests and demos can make one rank fail the way real ranks do."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from standin_engine.start_phases import DEFAULT_PHASE_SECONDS, PHASES

CRASH_AT_INIT = "STANDIN_CRASH_AT_INIT"
CRASH_ONCE_FILE = "STANDIN_CRASH_ONCE_FILE"
CRASH_WHILE_FILE = "STANDIN_CRASH_WHILE_FILE"
HANG_BEFORE_RENDEZVOUS = "STANDIN_HANG_BEFORE_RENDEZVOUS"
SLOW_START_SECONDS = "STANDIN_SLOW_START_SECONDS"
PHASE_SECONDS = "STANDIN_PHASE_SECONDS"
HANG_IN_PHASE = "STANDIN_HANG_IN_PHASE"
ANSWER_SALT_FILE = "STANDIN_ANSWER_SALT_FILE"
WEDGE_WHILE_FILE = "STANDIN_WEDGE_WHILE_FILE"
WEDGE_AFTER_ANSWERS = "STANDIN_WEDGE_AFTER_ANSWERS"
WEDGE_POLL_SECONDS = 0.2
DEFAULT_ANSWER_SALT_FILE = "/tmp/standin-answer-salt"

ALL_RANKS = "all"


class KnobError(ValueError):
    """An environment knob whose value cannot be read; the message names the variable and a valid example."""


@dataclass(frozen=True, kw_only=True)
class FailureKnobs:
    """The failure knobs of one launch; all empty means a healthy engine."""

    crash_at_init: frozenset[int] | None
    """Node ranks that crash in init_torch_distributed; None when the variable is unset."""
    crash_once_file: str | None
    """Marker file: a selected rank crashes only while it does not exist, and creates it when it does."""
    crash_while_file: str | None = None
    """Every rank crashes at init while this file exists (a test makes a member crash on every start, without a
    new deployment, by creating it on that node: the containers see the node's cache dir as ~/.cache)."""
    hang_before_rendezvous: frozenset[int] | None
    """Node ranks that stop before the rendezvous and never arrive."""
    slow_start_seconds: float
    """Seconds every rank sleeps before it starts to initialise."""
    phase_seconds: Mapping[str, float] = field(default_factory=dict)
    """Seconds a start phase takes (STANDIN_PHASE_SECONDS); phases not named take DEFAULT_PHASE_SECONDS."""
    hang_in_phase: frozenset[tuple[str, int]] = frozenset()
    """(phase, node rank) pairs: that rank stops for good in that phase, after its begin line."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], nnodes: int, engine: str = "sglang") -> FailureKnobs:
        """Read the knobs; raise KnobError for a value that is not a rank list, a number or a phase of `engine`."""
        wedge_after_answers(environ)  # read by the API server; a bad value fails the launch here, named
        slow_text = environ.get(SLOW_START_SECONDS, "").strip()
        try:
            slow_start_seconds = float(slow_text) if slow_text else 0.0
        except ValueError:
            raise KnobError(f"{SLOW_START_SECONDS}={slow_text!r} is not a number of seconds (e.g. 2.5)") from None
        if slow_start_seconds < 0:
            raise KnobError(f"{SLOW_START_SECONDS}={slow_text!r} must not be negative (e.g. 2.5)")
        return cls(
            crash_at_init=_rank_set(environ, CRASH_AT_INIT, nnodes),
            crash_once_file=environ.get(CRASH_ONCE_FILE) or None,
            crash_while_file=environ.get(CRASH_WHILE_FILE) or None,
            hang_before_rendezvous=_rank_set(environ, HANG_BEFORE_RENDEZVOUS, nnodes),
            slow_start_seconds=slow_start_seconds,
            phase_seconds=_phase_seconds(environ, engine),
            hang_in_phase=_hang_in_phase(environ, engine, nnodes),
        )

    def seconds_in(self, phase: str) -> float:
        """How long this launch spends in `phase` (its own work; waiting for other ranks comes on top)."""
        return self.phase_seconds.get(phase, DEFAULT_PHASE_SECONDS)

    def hangs_in(self, phase: str, node_rank: int) -> bool:
        """Whether this rank stops for good in `phase`."""
        return (phase, node_rank) in self.hang_in_phase

    def hangs_before_rendezvous(self, node_rank: int) -> bool:
        """Whether this rank stops before the rendezvous, as a rank that never arrives."""
        return self.hang_before_rendezvous is not None and node_rank in self.hang_before_rendezvous

    def claim_crash_at_init(self, node_rank: int) -> str | None:
        """Why this rank must crash now, or None; with a crash-once file, claiming it creates the file."""
        if self.crash_while_file is not None and os.path.exists(self.crash_while_file):
            return f"{CRASH_WHILE_FILE}={self.crash_while_file} exists (every start crashes until it is removed)"
        if self.crash_at_init is not None:
            if node_rank not in self.crash_at_init:
                return None
        elif self.crash_once_file is None:
            return None
        if self.crash_once_file is None:
            return f"{CRASH_AT_INIT} selects node rank {node_rank}"
        # O_EXCL makes the claim atomic: of two starts racing on one file, exactly one crashes.
        os.makedirs(os.path.dirname(os.path.abspath(self.crash_once_file)), exist_ok=True)
        try:
            os.close(os.open(self.crash_once_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return None
        return f"{CRASH_ONCE_FILE}={self.crash_once_file} did not exist (created it: the next start will not crash)"


def answer_salt(environ: Mapping[str, str]) -> str:
    """The answer-salt knob: the content of STANDIN_ANSWER_SALT_FILE (default /tmp/standin-answer-salt), "" without it.

    Read at every request, and a file rather than a variable: a test changes a running engine's answers (what the
    canary catches) without a restart, which would change the group's revision and its history of starts.
    """
    try:
        with open(environ.get(ANSWER_SALT_FILE) or DEFAULT_ANSWER_SALT_FILE, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def wedge_file(environ: Mapping[str, str]) -> str | None:
    """The wedge knob's file when it exists now (None: the engine answers).

    While STANDIN_WEDGE_WHILE_FILE exists, a running engine answers no generation (a completion, a chat, SGLang's
    /health_generate) while its process, its container and its /health stay up: a wedged engine (an NCCL collective
    that never returns, a hung scheduler). A file, read at every request, so a test wedges a running engine and
    clears it without a restart; left in place, every start is wedged too.
    """
    path = environ.get(WEDGE_WHILE_FILE)
    return path if path and os.path.exists(path) else None


def wedge_after_answers(environ: Mapping[str, str]) -> int | None:
    """STANDIN_WEDGE_AFTER_ANSWERS=N: this engine answers N generations, then none (None: unset).

    A revision that answers its first request and then wedges for good (issue 41, 4): set in the engine's
    environment, so it is the revision's own (a rollback to a revision without it serves), and it lasts the
    process's life, not a file's. Raises KnobError for a value that is not a whole number >= 0.
    """
    text = environ.get(WEDGE_AFTER_ANSWERS, "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise KnobError(f"{WEDGE_AFTER_ANSWERS}={text!r} is not a whole number of answers (e.g. 1)")
    return int(text)


def hold_while_wedged(environ: Mapping[str, str]) -> None:
    """Block the calling request while the wedge knob's file exists (forever, if it stays: as a real wedge)."""
    while wedge_file(environ) is not None:
        time.sleep(WEDGE_POLL_SECONDS)


def _rank_set(environ: Mapping[str, str], name: str, nnodes: int) -> frozenset[int] | None:
    text = environ.get(name)
    if text is None or not text.strip():
        return None
    if text.strip().lower() == ALL_RANKS:
        return frozenset(range(nnodes))
    ranks = set()
    for item in text.replace(",", " ").split():
        if not item.isdigit():
            raise KnobError(f"{name}={text!r} is not a list of node ranks (e.g. '1' or '1,2' or 'all')")
        ranks.add(int(item))
    return frozenset(ranks)


def _phases(engine: str) -> tuple[str, ...]:
    return PHASES["vllm" if engine == "vllm" else "sglang"]


def _phase_seconds(environ: Mapping[str, str], engine: str) -> dict[str, float]:
    text = environ.get(PHASE_SECONDS, "").strip()
    if not text:
        return {}
    phases = _phases(engine)
    example = f"{PHASE_SECONDS}='weights=3,graph=2' (phases of {engine}: {', '.join(phases)})"
    seconds: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        name = name.strip()
        if not sep or name not in phases:
            raise KnobError(f"{PHASE_SECONDS}={text!r}: {item.strip()!r} is not PHASE=SECONDS, e.g. {example}")
        try:
            seconds[name] = float(value)
        except ValueError:
            raise KnobError(f"{PHASE_SECONDS}={text!r}: {value.strip()!r} is not a number, e.g. {example}") from None
        if not 0 <= seconds[name] < float("inf"):
            raise KnobError(f"{PHASE_SECONDS}={text!r}: {name} must be 0 or more seconds, e.g. {example}")
    return seconds


def _hang_in_phase(environ: Mapping[str, str], engine: str, nnodes: int) -> frozenset[tuple[str, int]]:
    text = environ.get(HANG_IN_PHASE, "").strip()
    if not text:
        return frozenset()
    phases = _phases(engine)
    example = f"{HANG_IN_PHASE}='dist_init@1' or 'graph@0' or 'weights@all' (phases of {engine}: {', '.join(phases)})"
    hangs: set[tuple[str, int]] = set()
    for item in text.split(","):
        name, sep, rank_text = item.strip().partition("@")
        name, rank_text = name.strip(), rank_text.strip()
        if not sep or name not in phases:
            raise KnobError(f"{HANG_IN_PHASE}={text!r}: {item.strip()!r} is not PHASE@NODE_RANK, e.g. {example}")
        if rank_text.lower() == ALL_RANKS:
            hangs.update((name, rank) for rank in range(nnodes))
        elif rank_text.isdigit() and int(rank_text) < nnodes:
            hangs.add((name, int(rank_text)))
        else:
            raise KnobError(
                f"{HANG_IN_PHASE}={text!r}: {rank_text!r} is not a node rank of this group (0 to {nnodes - 1} or "
                f"'all'), e.g. {example}"
            )
    return frozenset(hangs)
