"""Read-only scripts on the nodes for the operator tools, over spark_llm.remote.ssh (pinned host keys, workers
through their jump host). Unlike `run_script` (for `pulumi up`), a failure is returned, not raised, and
each script gets its own connection: no master connection opened earlier stands in for a host key check.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO

from spark_llm.config.nodes import keyscan_type
from spark_llm.plan.hosts import SshHost
from spark_llm.remote.ssh import ssh_argv, ssh_files

# Printed by a script run with `run_with_clock` when it is ready for the clock exchange.
CLOCK_READY = "spark-llm: clock"
NO_ANSWER = -1


@dataclass(frozen=True)
class NodeRun:
    """What one script did on one node."""

    node: str
    code: int
    """Exit code; 255 when ssh itself failed, NO_ANSWER when the node gave no answer in time."""
    stdout: str
    stderr: str
    seconds: float
    clock_skew: float | None = None
    """The node's clock minus this machine's, in seconds (run_with_clock only)."""
    clock_error: float | None = None
    """The skew is known to within this many seconds (half the exchange's round trip)."""

    @property
    def ok(self) -> bool:
        return self.code == 0

    @property
    def ssh_failed(self) -> bool:
        return self.code in (255, NO_ANSWER)


def quote(value: str) -> str:
    """Always single-quoted, for values put into scripts."""
    return "'" + value.replace("'", "'\\''") + "'"


def _start_ssh(argv: list[str]) -> subprocess.Popen[str]:
    """ssh in a session of its own: see _end_helpers."""
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _end_helpers(proc: subprocess.Popen) -> None:
    """After ssh exited: end what it left behind. A ProxyJump helper (`ssh -W` to the jump host) can outlive it
    for minutes while the jump host still tries to reach an unreachable node, holding our stderr pipe open: the
    reader would then never see the end of ssh's own error message."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_lines(stream: IO[str], into: list[str]) -> threading.Thread:
    """Collect a pipe's lines as they come (not at EOF only: a helper may keep the pipe open)."""

    def read() -> None:
        for line in stream:
            into.append(line)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def run_on(target: SshHost, script: str, *, timeout: float = 60) -> NodeRun:
    """Run a bash script (`set -uo pipefail`, sent over stdin) on `target`; never raises for a node's failure."""
    start = time.monotonic()
    with ssh_files(target, multiplex=False) as config:
        proc = _start_ssh(ssh_argv(config, target, ["bash", "-s"]))
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        out: list[str] = []
        err: list[str] = []
        readers = [_read_lines(proc.stdout, out), _read_lines(proc.stderr, err)]
        try:
            proc.stdin.write("set -uo pipefail\n" + script)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            _end_helpers(proc)
            return NodeRun(target.name, NO_ANSWER, "", f"no answer within {timeout:.0f} s", time.monotonic() - start)
        _end_helpers(proc)
        for reader in readers:
            reader.join(timeout=5)
    return NodeRun(target.name, code, "".join(out), "".join(err), time.monotonic() - start)


def run_attached(target: SshHost, command: list[str]) -> int:
    """Run `command` (argv) on `target` with this terminal's stdin, stdout and stderr; its exit code (255: ssh
    failed). Its own connection, as every run here: the pins are checked each time."""
    with ssh_files(target, multiplex=False) as config:
        # One word for the remote shell: ssh joins its arguments with spaces, so each is quoted here once.
        argv = ssh_argv(config, target, [shlex.join(command)])
        terminal = sys.stdin.isatty() and sys.stdout.isatty()
        if terminal:
            argv.insert(1, "-t")  # a terminal there too: `sudo` can ask for its password
        # On a terminal ssh stays in its process group (a session of its own could not read the terminal); else
        # a session of its own, so that _end_helpers can end a lingering jump helper.
        proc = subprocess.Popen(argv, start_new_session=not terminal)
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
            raise
        finally:
            if not terminal:
                _end_helpers(proc)


def clock_script(script: str) -> str:
    """`script` after a clock exchange: print CLOCK_READY, wait for a line, print the time, then run it.

    bash reads a script from a pipe one byte at a time and parses the whole `{ ...; }; exit` group before running
    it (POSIX: the shell leaves its stdin right after the command it read), so the `read` gets the line this
    machine sends after the script; the script's own commands read nothing.
    """
    return (
        "set -uo pipefail\n{\n"
        f"printf '%s\\n' {quote(CLOCK_READY)}\n"
        "read -r _ || exit 0\n"
        "date +%s.%N\n"
        "{\n" + script.rstrip("\n") + "\n} </dev/null\n}; exit\n"
    )


def run_with_clock(target: SshHost, script: str, *, timeout: float = 60) -> NodeRun:
    """Like run_on, and measures the node's clock against this one once the session is up (NTP-style:
    the node's time against the midpoint of a round trip that excludes the ssh handshake)."""
    start = time.monotonic()
    deadline = start + timeout
    with ssh_files(target, multiplex=False) as config:
        proc = _start_ssh(ssh_argv(config, target, ["bash", "-s"]))
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        lines: queue.Queue[str | None] = queue.Queue()
        errors: list[str] = []

        def read_out() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        readers = [threading.Thread(target=read_out, daemon=True), _read_lines(proc.stderr, errors)]
        readers[0].start()

        ended = False

        def next_line() -> str | None:
            """The next output line; None at the end of the output or at the deadline."""
            nonlocal ended
            if ended:
                return None
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                return None
            ended = line is None
            return line

        def finish(code: int, out: list[str], skew: float | None = None, error: float | None = None) -> NodeRun:
            _end_helpers(proc)
            for reader in readers:
                reader.join(timeout=5)
            stderr = "".join(errors) if code != NO_ANSWER else f"no answer within {timeout:.0f} s"
            return NodeRun(target.name, code, "".join(out), stderr, time.monotonic() - start, skew, error)

        skew: float | None = None
        error: float | None = None
        try:
            proc.stdin.write(clock_script(script))
            proc.stdin.flush()
            line = next_line()
            if line is not None and line.rstrip("\n") == CLOCK_READY:
                sent = time.time()
                proc.stdin.write("\n")
                proc.stdin.flush()
                answer = next_line()
                received = time.time()
                if answer is not None:
                    try:
                        skew = float(answer) - (sent + received) / 2
                        error = (received - sent) / 2
                    except ValueError:
                        pass
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        out: list[str] = []
        while (line := next_line()) is not None:
            out.append(line)
        try:
            code = proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return finish(NO_ANSWER, out)
        return finish(code, out, skew, error)


@dataclass(frozen=True)
class SshFailure:
    kind: str
    """host key mismatch | key refused | unreachable | no answer | ssh failed"""
    message: str


_MISMATCH = ("host key verification failed", "remote host identification has changed", "host key for")
_REFUSED = ("permission denied", "too many authentication failures")
_UNREACHABLE = (
    "connection refused",
    "connection timed out",
    "operation timed out",
    "no route to host",
    "network is unreachable",
    "could not resolve",
    "name or service not known",
    "connection closed",
    "connection reset",
    "kex_exchange_identification",
    "stdio forwarding failed",
    "open failed",
)


def ssh_failure(run: NodeRun) -> SshFailure:
    """Pure: what kind of ssh failure a run's stderr shows (a host key mismatch is not an unreachable node)."""
    text = run.stderr.strip()
    lower = text.lower()
    last = text.splitlines()[-1] if text else f"exit {run.code}"
    if run.code == NO_ANSWER:
        return SshFailure("no answer", text or "no answer")
    if any(m in lower for m in _MISMATCH):
        return SshFailure("host key mismatch", last)
    if "identity file" in lower and "not accessible" in lower:
        return SshFailure("key refused", text.splitlines()[0])
    if any(m in lower for m in _REFUSED):
        return SshFailure("key refused", last)
    if any(m in lower for m in _UNREACHABLE):
        return SshFailure("unreachable", last)
    return SshFailure("ssh failed", last)


def fingerprint(key_line: str) -> str:
    """Pure: `SHA256:...` of an OpenSSH public key line, as `ssh-keygen -lf` prints it."""
    try:
        blob = base64.b64decode(key_line.split()[1], validate=True)
    except (IndexError, binascii.Error, ValueError):
        return "?"
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def keyscan_line(text: str, key_type: str) -> str | None:
    """Pure: the `TYPE BASE64` key from `ssh-keyscan` output, or None."""
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and not line.startswith("#") and fields[1] == key_type:
            return f"{fields[1]} {fields[2]}"
    return None


def presented_host_key(target: SshHost, *, timeout: float = 20) -> str | None:
    """The host key `target` presents now (ssh-keyscan from this machine, or from its jump host)."""
    key_type = target.host_key.split()[0]
    scan = ["ssh-keyscan", "-T", "5", "-t", keyscan_type(key_type), "-p", str(target.port), target.host]
    if target.via is None:
        try:
            out = subprocess.run(scan, capture_output=True, text=True, timeout=timeout).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
    else:
        run = run_on(target.via, shlex.join(scan) + " 2>/dev/null\n", timeout=timeout)
        out = run.stdout
    return keyscan_line(out, key_type)


# ---------- sections: one script, many facts ----------

SECTION_FUNCTION = r"""capture() {
  local name=$1
  shift
  printf -- '--- spark-llm:%s ---\n' "$name"
  "$@" 2>&1
  printf -- '\n--- spark-llm:rc=%s ---\n' "$?"
}
"""

_SECTION = re.compile(r"^--- spark-llm:(\S+) ---$")


@dataclass(frozen=True)
class Section:
    """One `capture NAME cmd...` of a script: the command's exit code and its output."""

    rc: int
    body: str

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def first_line(self) -> str:
        return next((line for line in self.body.splitlines() if line.strip()), "")


def parse_sections(text: str) -> dict[str, Section]:
    """Pure: the sections a script made with `capture` printed (a section cut short is left out)."""
    sections: dict[str, Section] = {}
    name: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        match = _SECTION.match(line)
        if not match:
            if name is not None:
                body.append(line)
            continue
        tag = match.group(1)
        if tag.startswith("rc=") and name is not None:
            rc = int(tag[3:]) if tag[3:].lstrip("-").isdigit() else -1
            sections[name] = Section(rc, "\n".join(body).strip("\n"))
            name, body = None, []
        elif not tag.startswith("rc="):
            name, body = tag, []
    return sections
