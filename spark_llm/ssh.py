"""OpenSSH to the nodes: pinned host keys, workers through the head as a jump host, scripts over stdin.

Shared by the Pulumi resources (spark_llm.remote) and the operator CLI, so both reach a node the same way.
Why OpenSSH and not a library: ProxyJump, ControlMaster and known_hosts pinning are OpenSSH's own, and an
operator can reproduce any step by hand with the same ssh_config this module writes.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO


@dataclass(frozen=True)
class SshHost:
    """One node as ssh reaches it: `host` is the address as seen from the operator, or from `via` if set."""

    name: str
    host: str
    port: int
    user: str
    key_path: str
    host_key: str
    via: SshHost | None = None

    @classmethod
    def from_props(cls, props: Mapping) -> SshHost:
        """Rebuild from the plain dict a Pulumi resource stores (see `to_props`)."""
        via = props.get("via")
        return cls(
            name=props["name"],
            host=props["host"],
            port=int(props["port"]),
            user=props["user"],
            key_path=props["key_path"],
            host_key=props["host_key"],
            via=cls.from_props(via) if via else None,
        )

    def to_props(self) -> dict:
        return {
            "name": self.name,
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "key_path": self.key_path,
            "host_key": self.host_key,
            "via": self.via.to_props() if self.via else None,
        }

    def chain(self) -> list[SshHost]:
        """This host and every jump host before it, outermost first."""
        return (self.via.chain() if self.via else []) + [self]


class RemoteError(RuntimeError):
    """A remote script failed; the message carries the node, exit code and the last output lines."""


def ssh_config(target: SshHost, known_hosts: Path, control_dir: Path | None = None) -> str:
    """An ssh_config for `target` and its jump hosts, each pinned to its own host key by alias."""
    blocks = []
    for hop in target.chain():
        lines = [
            f"Host {hop.name}",
            f"  HostName {hop.host}",
            f"  Port {hop.port}",
            f"  User {hop.user}",
            f"  IdentityFile {hop.key_path}",
            "  IdentitiesOnly yes",
            # Pin by node name, not address: the same key file serves every address the node is reached on.
            f"  HostKeyAlias {hop.name}",
            f"  UserKnownHostsFile {known_hosts}",
            "  StrictHostKeyChecking yes",
            "  GlobalKnownHostsFile /dev/null",
            "  BatchMode yes",
            "  ConnectTimeout 15",
            # A dead node shows up within a minute instead of hanging a `pulumi up` forever.
            "  ServerAliveInterval 15",
            "  ServerAliveCountMax 4",
            "  LogLevel ERROR",
        ]
        if hop.via:
            lines.append(f"  ProxyJump {hop.via.name}")
        if control_dir:
            # One TCP+auth handshake per node for a whole `pulumi up`, not one per command.
            lines += ["  ControlMaster auto", f"  ControlPath {control_dir}/%C", "  ControlPersist 30"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def known_hosts(target: SshHost) -> str:
    return "".join(f"{hop.name} {hop.host_key.strip()}\n" for hop in target.chain())


@contextlib.contextmanager
def ssh_files(target: SshHost, *, multiplex: bool = True) -> Iterator[Path]:
    """A private temp dir with `config` and `known_hosts` for `target`; yields the config path.

    `multiplex=False` makes every connection its own handshake: a check of the pinned host key must not ride
    on a master connection opened before the pin changed.
    """
    with tempfile.TemporaryDirectory(prefix="spark-llm-ssh-") as tmp:
        d = Path(tmp)
        (d / "known_hosts").write_text(known_hosts(target))
        control = None
        if multiplex:
            control = Path(tempfile.gettempdir()) / f"spark-llm-ssh-ctl-{os.getuid()}"
            control.mkdir(mode=0o700, exist_ok=True)
        (d / "config").write_text(ssh_config(target, d / "known_hosts", control))
        yield d / "config"


def ssh_argv(config: Path, target: SshHost, remote: list[str]) -> list[str]:
    return ["ssh", "-F", str(config), target.name, "--", *remote]


# A script run with a `feed` prints this line when it is ready to read the feed's bytes on its stdin.
FEED_REQUEST = "spark-llm: ready for the feed on stdin"
# Set by spark_llm.remote for a script with a feed: the output of the feed's probe on this machine.
FEED_PROBE_ENV = "SPARK_LLM_FEED_PROBE"
FEED_CHUNK_BYTES = 1 << 20
FEED_PROGRESS_SECONDS = 5.0


def stdin_script(script: str) -> str:
    """The script as bash reads it when its stdin carries more than the script (a feed follows it).

    bash reads a script from a pipe one byte at a time and parses a whole command list before running it
    (POSIX: the shell leaves its stdin right after the command it read). Inside the group, a command that reads
    stdin (`docker load`) gets exactly the bytes sent after the `exit` line; the group ends in `exit`, so those
    bytes are never read as script, whatever the script does.
    """
    return "set -euo pipefail\n{\n" + script.rstrip("\n") + "\n}; exit\n"


class _Feed:
    """Streams a local command's stdout into the remote script's stdin, reporting bytes and rate."""

    def __init__(self, argv: list[str], sink: IO[bytes], report: Callable[[str], None]) -> None:
        self.argv = argv
        self.sink = sink
        self.report = report
        self.error: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = False
        self.thread = threading.Thread(target=self._pump, daemon=True)

    def start(self) -> None:
        """Start streaming (once: a second request is ignored)."""
        if not self.started:
            self.started = True
            self.thread.start()

    def _pump(self) -> None:
        start = last = time.monotonic()
        sent = 0
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            assert self.proc.stdout is not None
            source = self.proc.stdout
            while chunk := os.read(source.fileno(), FEED_CHUNK_BYTES):
                try:
                    self.sink.write(chunk)
                except (BrokenPipeError, ValueError):
                    self.error = f"the node stopped reading after {sent} bytes"
                    self.proc.kill()
                    break
                sent += len(chunk)
                now = time.monotonic()
                if now - last >= FEED_PROGRESS_SECONDS:
                    last = now
                    self.report(
                        f"{sent // 1_000_000} MB sent from this machine ({sent / 1e6 / (now - start):.0f} MB/s)"
                    )
            err = self.proc.stderr.read().decode(errors="replace").strip() if self.proc.stderr else ""
            code = self.proc.wait()
            if code != 0 and self.error is None:
                self.error = f"`{' '.join(self.argv)}` exited {code} on this machine: {err[-500:]}"
        except OSError as exc:
            self.error = f"`{' '.join(self.argv)}` could not run on this machine: {exc}"
        finally:
            with contextlib.suppress(OSError, ValueError):
                self.sink.close()
        if self.error is None:
            took = max(time.monotonic() - start, 1e-6)
            self.report(f"sent {sent} bytes from this machine in {took:.1f} s ({sent / 1e6 / took:.1f} MB/s)")

    def finish(self, *, kill: bool) -> None:
        """Wait for the stream to end; `kill` ends the local command first (the node is gone)."""
        if not self.started:
            return
        if not kill:
            self.thread.join(timeout=30)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        self.thread.join(timeout=10)


def _execute(
    argv: list[str],
    script: str,
    *,
    prefix: str,
    stream: bool,
    timeout: float | None,
    tail_lines: int,
    feed: list[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[int, str, deque[str], str | None]:
    """Run argv with `script` on stdin (then the feed's bytes, if any); echo its lines to stderr after `prefix`.

    Returns the exit code, the whole output, its last `tail_lines` lines and the feed's error (None if fine);
    raises TimeoutError (with the last lines) on timeout.
    """

    def report(line: str) -> None:
        if stream:
            sys.stderr.write(prefix + line + "\n")
            sys.stderr.flush()

    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=None if env is None else {**os.environ, **env},
    )
    assert proc.stdin is not None
    lines: deque[str] = deque(maxlen=max(tail_lines, 1))
    collected: list[str] = []
    pipe = _Feed(feed, proc.stdin, report) if feed is not None else None

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            if pipe is not None and line.rstrip("\n") == FEED_REQUEST:
                pipe.start()
                continue
            collected.append(line)
            lines.append(line.rstrip("\n"))
            if stream:
                sys.stderr.write(prefix + line)
                sys.stderr.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    body = stdin_script(script) if feed is not None else "set -euo pipefail\n" + script
    try:
        proc.stdin.write(body.encode())
        proc.stdin.flush()
        if pipe is None:
            proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        if pipe is not None:
            pipe.finish(kill=True)
        raise TimeoutError("\n".join(lines)) from None
    reader.join(timeout=5)
    if pipe is not None:
        pipe.finish(kill=code != 0)
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()
    return code, "".join(collected), lines, pipe.error if pipe is not None else None


def run_script(
    target: SshHost,
    script: str,
    *,
    label: str = "",
    stream: bool = True,
    timeout: float | None = None,
    tail_lines: int = 40,
    feed: list[str] | None = None,
) -> str:
    """Run a bash script on `target`, sent over stdin so it never shows on a command line.

    Output lines are echoed to stderr prefixed with `[label]` when `stream` is set (the Pulumi CLI shows a
    provider's stderr as progress). Returns the combined output; raises RemoteError with the last
    `tail_lines` lines when the script fails.

    `feed` is a command run on this machine once the script prints FEED_REQUEST: its output is streamed into
    the script's stdin (e.g. `docker save` here into `docker load` there), with progress lines on stderr.
    """
    prefix = f"[{label or target.name}] "
    with ssh_files(target) as config:
        try:
            code, output, lines, feed_error = _execute(
                ssh_argv(config, target, ["bash", "-s"]),
                script,
                prefix=prefix,
                stream=stream,
                timeout=timeout,
                tail_lines=tail_lines,
                feed=feed,
            )
        except TimeoutError as err:
            raise RemoteError(f"{target.name}: no answer after {timeout:.0f} s; last output:\n{err}") from None
    if code != 0 or feed_error:
        where = f"{target.name} ({target.user}@{target.host}" + (f" via {target.via.name})" if target.via else ")")
        if feed_error:
            hint = f"the feed failed: {feed_error}"
        elif code == 255:
            hint = (
                "ssh could not connect or the host key did not match the pinned one; "
                "check the node is up and its hostKey in the stack config"
            )
        else:
            hint = "the script failed on the node"
        raise RemoteError(f"{where}: exit {code}: {hint}. Last output:\n" + "\n".join(lines))
    return output


def run_local_script(
    target: SshHost,
    script: str,
    *,
    label: str = "",
    stream: bool = True,
    timeout: float | None = None,
    tail_lines: int = 40,
) -> str:
    """Run a bash script on this machine that reaches `target` itself (an upload: `rsync -e "ssh -F ..."`).

    The script gets SPARK_LLM_SSH_CONFIG (the same pinned ssh_config `run_script` uses) and SPARK_LLM_SSH_HOST
    (the host alias in it). Output, errors and timeouts as in `run_script`.
    """
    prefix = f"[{label or 'local'}] "
    with ssh_files(target) as config:
        env = {"SPARK_LLM_SSH_CONFIG": str(config), "SPARK_LLM_SSH_HOST": target.name}
        try:
            code, output, lines, _ = _execute(
                ["bash", "-s"], script, prefix=prefix, stream=stream, timeout=timeout, tail_lines=tail_lines, env=env
            )
        except TimeoutError as err:
            raise RemoteError(f"local script for {target.name}: still running after {timeout:.0f} s:\n{err}") from None
    if code != 0:
        raise RemoteError(
            f"local script for {target.name} ({target.user}@{target.host}): exit {code}. Last output:\n"
            + "\n".join(lines)
        )
    return output
