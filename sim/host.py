"""Commands the sim runs on this machine: the docker CLI and friends, progress lines, bounded waits."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class SimError(Exception):
    """An error the CLI reports as one line, without a traceback."""


class Progress:
    """Progress lines on stderr, each with the seconds since the command started."""

    def __init__(self) -> None:
        self._started = time.monotonic()

    def step(self, message: str) -> None:
        elapsed = time.monotonic() - self._started
        print(f"[sim {elapsed:6.1f}s] {message}", file=sys.stderr, flush=True)


def run(
    cmd: Sequence[str],
    *,
    check: bool = True,
    stdin_text: str | None = None,
    stdin_file: Path | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command and capture its output; raise SimError with its stderr when it fails."""
    try:
        if stdin_file is not None:
            with stdin_file.open("rb") as stdin:
                done = subprocess.run(cmd, stdin=stdin, capture_output=True, timeout=timeout)
            result = subprocess.CompletedProcess(
                done.args,
                done.returncode,
                done.stdout.decode(errors="replace"),
                done.stderr.decode(errors="replace"),
            )
        else:
            result = subprocess.run(
                cmd,
                input=stdin_text,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=None if stdin_text is not None else subprocess.DEVNULL,
            )
    except subprocess.TimeoutExpired as exc:
        raise SimError(f"`{' '.join(cmd)}` did not finish within {timeout}s") from exc
    if check and result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()
        raise SimError(f"`{' '.join(cmd)}` failed ({result.returncode}): {detail}")
    return result


def docker(*args: str, check: bool = True, stdin_text: str | None = None) -> str:
    """Run the docker CLI; return its stdout without the trailing newline."""
    return run(["docker", *args], check=check, stdin_text=stdin_text).stdout.strip()


def wait_until(what: str, ready: Callable[[], bool], timeout_s: float, interval_s: float = 1.0) -> None:
    """Poll until ready() is true; give up after timeout_s saying what was waited for."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() >= deadline:
            raise SimError(f"gave up after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)
