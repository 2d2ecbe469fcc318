"""Waiting in tests on the condition itself, with a deadline, instead of sleeping for a guessed time.

A sleep that stands in for "long enough" is too short on a loaded machine (the test fails for no reason) and too
long on an idle one; a wait on the condition returns as soon as it holds and, at its deadline, says what it waited
for and what it saw last.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import IO, TypeVar

T = TypeVar("T")

POLL_INTERVAL_S = 0.2


def wait_for(what: str, check: Callable[[], T], timeout_s: float, interval_s: float = POLL_INTERVAL_S) -> T:
    """Call check() until it returns something true and return that; raise AssertionError naming `what` (and the
    last value check() returned) after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"gave up after {timeout_s:.0f} s waiting for {what} (last seen: {value!r})")
        time.sleep(interval_s)  # the poll interval inside the deadline, not a wait on a condition


class StreamReader:
    """A child's output pipe read on a thread while the child runs, so a test can wait for a line in it (a child
    blocked on a full pipe never prints the next line). text() is what arrived so far; finish() all of it."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._lock:
                self._lines.append(line)

    def text(self) -> str:
        with self._lock:
            return "".join(self._lines)

    def wait_for_line(self, pattern: str, what: str, timeout_s: float, alive: Callable[[], bool]) -> re.Match[str]:
        """The first match of pattern (a regex) in the output; fails at once when alive() turns false (the child
        exited without printing it) and after timeout_s, showing the output's tail either way."""
        deadline = time.monotonic() + timeout_s
        while not (found := re.search(pattern, self.text())):
            if not alive():
                raise AssertionError(f"the process exited before printing {what}:\n{self.text()[-3000:]}")
            if time.monotonic() >= deadline:
                raise AssertionError(f"gave up after {timeout_s:.0f} s waiting for {what}:\n{self.text()[-3000:]}")
            time.sleep(POLL_INTERVAL_S)  # the poll interval inside the deadline
        return found

    def finish(self, timeout_s: float = 60) -> str:
        """All the output, once the child closed the pipe (call after it exited)."""
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), f"the pipe was still open {timeout_s:.0f} s after the process exited"
        return self.text()
