"""The one way this machine runs a script on a node: `run` (a NodeRun back, whatever happened), `run_script` (the
same, raising RemoteError on a failure), `run_attached` (this terminal's stdin and stdout, for `spark-llm exec`).

Scripts go over ssh's stdin (never on a command line), through spark_llm.remote.ssh (pinned host keys, workers
through the head as a jump host). The program's probe and readiness gate share one master connection per node
(`multiplex=True`: kept for the next program run, spark_llm.remote.ssh.control_dir); the operator's commands give
every script its own connection.
"""

from __future__ import annotations

import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO

from spark_llm.config.nodes import keyscan_type
from spark_llm.plan.hosts import SshHost
from spark_llm.remote.ssh import (
    HostKeyMismatchError,
    RemoteError,
    SshFailure,
    host_key_mismatch,
    ssh_argv,
    ssh_failure,
    ssh_files,
)

# Printed by a script run with `clock=True` when it is ready for the clock exchange.
CLOCK_READY = "spark-llm: clock"
# How long ssh-keyscan waits for a node's answer (its -T).
KEYSCAN_SECONDS = 5
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
    """The node's clock minus this machine's, in seconds (run with clock=True only)."""
    clock_error: float | None = None
    """The skew is known to within this many seconds (half the exchange's round trip)."""

    @property
    def ok(self) -> bool:
        return self.code == 0

    @property
    def ssh_failed(self) -> bool:
        return self.code in (255, NO_ANSWER)


def failure_of(run: NodeRun) -> SshFailure:
    """Pure: what kind of ssh failure a run shows (remote.ssh.ssh_failure of its stderr)."""
    return ssh_failure(run.stderr, answered=run.code != NO_ANSWER)


def quote(value: str) -> str:
    """Always single-quoted, for values put into scripts."""
    return "'" + value.replace("'", "'\\''") + "'"


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


def _end_helpers(proc: subprocess.Popen) -> None:
    """After ssh exited: end what it left behind. A ProxyJump helper (`ssh -W` to the jump host) can outlive it
    for minutes while the jump host still tries to reach an unreachable node, holding our stderr pipe open: the
    reader would then never see the end of ssh's own error message."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_lines(stream: IO[str], into: Callable[[str | None], None]) -> threading.Thread:
    """Pass a pipe's lines on as they come (not at EOF only: a helper may keep the pipe open), then None."""

    def read() -> None:
        for line in stream:
            into(line)
        into(None)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def run(
    target: SshHost,
    script: str,
    *,
    timeout: float | None = 60,
    multiplex: bool = False,
    errexit: bool = False,
    clock: bool = False,
    on_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
) -> NodeRun:
    """Run a bash script on `target` (sent over stdin, after `set -uo pipefail`, `-e` too with `errexit`); never
    raises for a node's failure: the NodeRun says what happened (255: ssh failed, NO_ANSWER: no answer in time).

    `multiplex`: ride on the node's master connection (spark_llm.remote.ssh.control_dir), opening it if needed.
    `clock`: measure the node's clock against this one once the session is up (NTP-style: the node's time against
    the midpoint of a round trip that excludes the ssh handshake). `on_line`: called with each output line as it
    comes (`spark-llm logs --follow`). `cancel`: set it to end the script early (its run reads as NO_ANSWER).
    """
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    with ssh_files(target, multiplex=multiplex) as config:
        # Without a master to keep, ssh runs in a session of its own so that _end_helpers can end a lingering jump
        # helper; a master connection (multiplex) must outlive this ssh.
        proc = subprocess.Popen(
            ssh_argv(config, target, ["bash", "-s"]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=not multiplex,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        lines: queue.Queue[str | None] = queue.Queue()
        errors: list[str] = []

        def error_line(line: str | None) -> None:
            if line is not None:
                errors.append(line)

        readers = [_read_lines(proc.stdout, lines.put), _read_lines(proc.stderr, error_line)]
        ended = False
        exited_at: float | None = None

        def next_line() -> str | None:
            """The next output line; None at the end of the output, at the deadline or when cancelled."""
            nonlocal ended, exited_at
            while not ended:
                if cancel is not None and cancel.is_set():
                    return None
                left = 0.2 if deadline is None else min(max(deadline - time.monotonic(), 0.0), 0.2)
                try:
                    line = lines.get(timeout=max(left, 0.01))
                except queue.Empty:
                    now = time.monotonic()
                    if deadline is not None and now >= deadline:
                        return None
                    # ssh exited but something it started (a master, a jump helper) still holds the pipe open.
                    if proc.poll() is not None:
                        exited_at = exited_at or now
                        ended = now - exited_at > 2
                    continue
                ended = line is None
                return line
            return None

        skew: float | None = None
        error: float | None = None
        out: list[str] = []
        try:
            if clock:
                proc.stdin.write(clock_script(script))
                proc.stdin.flush()
                first = next_line()
                if first is not None and first.rstrip("\n") == CLOCK_READY:
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
                elif first is not None:
                    out.append(first)
            else:
                proc.stdin.write(("set -euo pipefail\n" if errexit else "set -uo pipefail\n") + script)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        while (line := next_line()) is not None:
            out.append(line)
            if on_line is not None:
                on_line(line)
        try:
            if not ended:
                raise subprocess.TimeoutExpired(proc.args, timeout or 0)
            left = None if deadline is None else max(deadline - time.monotonic(), 0.01)
            code = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = NO_ANSWER
        if not multiplex:
            _end_helpers(proc)
        for reader in readers:
            reader.join(timeout=5)
    stderr = f"no answer within {timeout:.0f} s" if code == NO_ANSWER and timeout is not None else "".join(errors)
    return NodeRun(target.name, code, "".join(out), stderr, time.monotonic() - start, skew, error)


def run_script(target: SshHost, script: str, *, timeout: float | None = None, tail_lines: int = 40) -> str:
    """`run` for the program (`set -euo pipefail`, the node's master connection): its output, or RemoteError with
    the node, the exit code and the last `tail_lines` lines (HostKeyMismatchError naming the hop ssh refused)."""
    result = run(target, script, timeout=timeout, multiplex=True, errexit=True)
    if result.code == NO_ANSWER:
        last = "\n".join(result.stdout.splitlines()[-tail_lines:])
        raise RemoteError(f"{target.name}: no answer after {timeout:.0f} s; last output:\n{last}")
    if result.ok:
        return result.stdout
    where = f"{target.name} ({target.user}@{target.host}" + (f" via {target.via.name})" if target.via else ")")
    tail = "\n".join((result.stdout + result.stderr).splitlines()[-tail_lines:])
    refused = host_key_mismatch(target, result.stderr) if result.code == 255 else None
    if refused is not None:
        raise HostKeyMismatchError(
            f"{where}: exit {result.code}: ssh refused {refused}'s host key: it is not the pinned one. "
            f"Last output:\n{tail}",
            refused,
        )
    if result.code == 255:
        hint = (
            "ssh could not connect or the host key did not match the pinned one; "
            "check the node is up and its hostKey in the stack config"
        )
    else:
        hint = "the script failed on the node"
    raise RemoteError(f"{where}: exit {result.code}: {hint}. Last output:\n{tail}")


def run_attached(target: SshHost, command: list[str]) -> int:
    """Run `command` (argv) on `target` with this terminal's stdin, stdout and stderr; its exit code (255: ssh
    failed). Its own connection, as every operator command's: the pins are checked each time."""
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


def keyscan_keys(text: str) -> dict[str, str]:
    """Pure: the keys in `ssh-keyscan` output, `TYPE BASE64` by type (the first of each type)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and not line.startswith("#"):
            found.setdefault(fields[1], f"{fields[1]} {fields[2]}")
    return found


def keyscan_line(text: str, key_type: str) -> str | None:
    """Pure: the `TYPE BASE64` key of `key_type` from `ssh-keyscan` output, or None."""
    return keyscan_keys(text).get(key_type)


def keyscan(host: str, port: int, via: SshHost | None, *, key_type: str | None = None, timeout: float = 20) -> str:
    """What `ssh-keyscan` prints for `host:port` (its keys of `key_type`, an ssh-keyscan `-t` name, or all): run
    from this machine, or from the jump host `via`. "" when it could not run here."""
    scan = ["ssh-keyscan", "-T", str(KEYSCAN_SECONDS), *(["-t", key_type] if key_type else []), "-p", str(port), host]
    if via is None:
        try:
            return subprocess.run(scan, capture_output=True, text=True, timeout=timeout).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return run(via, shlex.join(scan) + " 2>/dev/null\n", timeout=timeout).stdout


def presented_host_key(target: SshHost, *, timeout: float = 20) -> str | None:
    """The host key `target` presents now (ssh-keyscan from this machine, or from its jump host)."""
    key_type = target.host_key.split()[0]
    out = keyscan(target.host, target.port, target.via, key_type=keyscan_type(key_type), timeout=timeout)
    return keyscan_line(out, key_type)
