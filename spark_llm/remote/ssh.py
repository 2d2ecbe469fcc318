"""OpenSSH to the nodes: pinned host keys, workers through the head as a jump host; what a failed ssh means.

How a node is reached (the ssh_config written for it, its options from spark_llm.plan.hosts) and how ssh's
failures read; spark_llm.remote.runner runs scripts with it for the program's probe (spark_llm.remote.observe),
the readiness gate and the operator CLI, so all reach a node the same way.
Why OpenSSH and not a library: ProxyJump, ControlMaster and known_hosts pinning are OpenSSH's own, and an
operator can reproduce any step by hand with the same ssh_config this module writes.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import hashlib
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from spark_llm.plan.hosts import SshHost, known_hosts_line, operator_ssh_options


class RemoteError(RuntimeError):
    """A remote script failed; the message carries the node, exit code and the last output lines."""


class HostKeyMismatchError(RemoteError):
    """ssh refused a hop whose host key is not the pinned one; `node` names that hop (the target or its jump host)."""

    def __init__(self, message: str, node: str) -> None:
        super().__init__(message)
        self.node = node


# What OpenSSH prints (at LogLevel ERROR) when a hop's key is not the pinned one; the name is the HostKeyAlias,
# the node's name (ssh_config below), so a worker behind a wrong head pin names the head.
_MISMATCH_NAMED = (
    re.compile(r"Host key for (\S+) has changed"),
    re.compile(r"No \S+ host key is known for (\S+) and"),
)


def host_key_mismatch(target: SshHost, output: str) -> str | None:
    """Pure: the node whose host key ssh refused, from ssh's output; None when the output shows no refusal."""
    if "Host key verification failed" not in output:
        return None
    names = {hop.name for hop in target.chain()}
    for pattern in _MISMATCH_NAMED:
        for match in pattern.finditer(output):
            if match.group(1) in names:
                return match.group(1)
    return target.name


def connection_id(hop: SshHost) -> str:
    """Pure: what identifies a reusable (multiplexed) connection to `hop`: every setting of it and of its jump
    hosts, the pinned host keys included. A master connection opened under another pin is never reused: a
    changed `hostKey` is checked by a new handshake."""
    fields = [(h.name, h.host, h.port, h.user, h.key_path, " ".join(h.host_key.split()[:2])) for h in hop.chain()]
    return hashlib.sha256(repr(fields).encode()).hexdigest()[:32]


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
            *(f"  {key} {value}" for key, value in operator_ssh_options(hop, str(known_hosts))),
        ]
        if hop.via:
            lines.append(f"  ProxyJump {hop.via.name}")
        if control_dir:
            # One TCP+auth handshake per node for the probe of a program run, not one per command. The socket is
            # named by the pins (connection_id) in a directory of this process only (control_dir).
            lines += [
                "  ControlMaster auto",
                f"  ControlPath {control_dir}/{connection_id(hop)}",
                "  ControlPersist 30",
            ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def known_hosts(target: SshHost) -> str:
    return "".join(known_hosts_line(hop) + "\n" for hop in target.chain())


_control_dir: Path | None = None
_control_lock = threading.Lock()
_CONTROL_PREFIX = "spark-llm-ssh-ctl-"
# A unix socket path holds at most 107 bytes, and ssh first binds a temp name 17 bytes longer than ControlPath.
_MAX_CONTROL_DIR = 107 - 17 - 1 - 32


def control_dir() -> Path | None:
    """This process's private dir for master connections (0700), made on first use; None if its path is too long
    for a socket.

    Masters are shared within one process (one program run: the head's connection carries its workers' probes)
    and never across runs: a master left by an earlier run would stand in for this run's host key check, and it
    dies with that run's faults ("mux_client_request_alive: write packet: Broken pipe" where ssh's own "Connection
    refused" belongs). The masters are stopped and the dir removed when the process exits.
    """
    global _control_dir
    with _control_lock:
        if _control_dir is None:
            remove_stale_control_dirs(Path(tempfile.gettempdir()))
            path = Path(tempfile.mkdtemp(prefix=_CONTROL_PREFIX))
            if len(str(path)) > _MAX_CONTROL_DIR:
                path.rmdir()
                return None
            _control_dir = path
            atexit.register(close_masters, path)
        return _control_dir


def remove_stale_control_dirs(parent: Path, *, older_than: float = 600) -> None:
    """Remove empty control dirs of runs that ended without their exit handler (killed, e.g. by Pulumi's SIGINT
    after a failed update): their masters exit by themselves within ControlPersist and take their sockets along."""
    now = time.time()
    for path in parent.glob(_CONTROL_PREFIX + "*"):
        with contextlib.suppress(OSError):
            # mkdtemp's names only (8 more characters): never another tool's or an older spark-llm's shared dir.
            if len(path.name) == len(_CONTROL_PREFIX) + 8 and now - path.stat().st_mtime > older_than:
                path.rmdir()  # only if empty: a live master's socket keeps it


def close_masters(directory: Path) -> None:
    """Stop every master connection whose socket is in `directory`, then remove it."""
    for socket in directory.iterdir():
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                ["ssh", "-F", "/dev/null", "-o", f"ControlPath={socket}", "-O", "exit", "spark-llm-master"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=10,
            )
    shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def ssh_files(target: SshHost, *, multiplex: bool = True) -> Iterator[Path]:
    """A private temp dir with `config` and `known_hosts` for `target`; yields the config path.

    `multiplex=True` shares one master connection per node within this process (control_dir); `False` makes
    every connection its own handshake.
    """
    with tempfile.TemporaryDirectory(prefix="spark-llm-ssh-") as tmp:
        d = Path(tmp)
        (d / "known_hosts").write_text(known_hosts(target))
        control = control_dir() if multiplex else None
        (d / "config").write_text(ssh_config(target, d / "known_hosts", control))
        yield d / "config"


def ssh_argv(config: Path, target: SshHost, remote: list[str]) -> list[str]:
    return ["ssh", "-F", str(config), target.name, "--", *remote]


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


def ssh_failure(stderr: str, *, answered: bool = True) -> SshFailure:
    """Pure: what kind of ssh failure ssh's stderr shows (a host key mismatch is not an unreachable node);
    `answered` False: the node gave no answer in time."""
    text = stderr.strip()
    lower = text.lower()
    last = text.splitlines()[-1] if text else "exit 255"
    if not answered:
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
