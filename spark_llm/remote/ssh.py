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
import os
import re
import shutil
import stat
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

    def one_line(self) -> str:
        """Where and what (the message's first line), then the last line of output (e.g. ssh's "No route to host")."""
        lines = [line for line in str(self).splitlines() if line.strip()]
        detail = f" {lines[-1].strip()}" if len(lines) > 1 else ""
        return lines[0].removesuffix(" Last output:") + detail if lines else type(self).__name__


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
    """What identifies a reusable (multiplexed) connection to `hop`: every setting of it and of its jump hosts, the
    pinned host keys and the identity file as it is now included. A master opened under another pin, or with a key
    file since replaced (rotated), is never reused: a changed `hostKey` is checked by a new handshake."""
    fields = [
        (h.name, h.host, h.port, h.user, h.key_path, _key_file_stamp(h.key_path), " ".join(h.host_key.split()[:2]))
        for h in hop.chain()
    ]
    return hashlib.sha256(repr(fields).encode()).hexdigest()[:32]


def _key_file_stamp(path: str) -> tuple[int, int, int] | None:
    """The key file's inode, size and mtime (its metadata only: the key itself is never read here)."""
    try:
        st = os.stat(os.path.expanduser(path))
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


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
            # One TCP+auth handshake per node for the program's runs within a minute of each other (`preview` then
            # `up`), not one per command. The socket is named by the pins (connection_id), in this user's own
            # directory (control_dir).
            lines += [
                "  ControlMaster auto",
                f"  ControlPath {control_dir}/{connection_id(hop)}",
                f"  ControlPersist {CONTROL_PERSIST_SECONDS}",
            ]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def known_hosts(target: SshHost) -> str:
    return "".join(known_hosts_line(hop) + "\n" for hop in target.chain())


CONTROL_PERSIST_SECONDS = 60
"""How long an idle master connection stays up for the next program run."""
# A master that does not answer a no-op within this is let go (its network went away under it): the run connects
# afresh, and a fault reads as ssh's own words ("Connection refused"), not as a mux error.
MASTER_CHECK_SECONDS = 5

_control_dir: Path | None = None
_control_lock = threading.Lock()
_checked: set[str] = set()
_CONTROL_PREFIX = "spark-llm-ssh-ctl-"
_USER_CONTROL_DIR = f"spark-llm-masters-{os.getuid()}"
# A unix socket path holds at most 107 bytes, and ssh first binds a temp name 17 bytes longer than ControlPath.
_MAX_CONTROL_DIR = 107 - 17 - 1 - 32


def control_dir() -> Path | None:
    """This user's dir for master connections, made on first use; None if its path is too long for a socket.

    A master outlives its program run by CONTROL_PERSIST_SECONDS, so `pulumi preview` then `pulumi up` make one
    handshake per node, not one each. It never stands in for a check it should not: its socket is named by the
    pins and the key file (connection_id), and a master is tried with a no-op before a run rides on it
    (check_masters). The dir is 0700 and this user's: one that is not (made by someone else, a symlink) is not
    used; this process then keeps its masters in a private dir of its own, stopped when it exits.
    """
    global _control_dir
    with _control_lock:
        if _control_dir is None:
            shared = Path(tempfile.gettempdir()) / _USER_CONTROL_DIR
            if len(str(shared)) > _MAX_CONTROL_DIR:
                return None
            with contextlib.suppress(FileExistsError):
                shared.mkdir(mode=0o700)
            st = shared.lstat()
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077 == 0:
                _control_dir = shared
            else:
                remove_stale_control_dirs(Path(tempfile.gettempdir()))
                _control_dir = Path(tempfile.mkdtemp(prefix=_CONTROL_PREFIX))
                atexit.register(close_masters, _control_dir)
        return _control_dir


def _master(config: Path, hop: SshHost, operation: str) -> bool:
    """`ssh -O operation` on hop's master (its socket from `config`); whether ssh said yes."""
    try:
        return (
            subprocess.run(
                ["ssh", "-F", str(config), "-O", operation, hop.name],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=MASTER_CHECK_SECONDS,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def check_masters(config: Path, target: SshHost, control: Path) -> None:
    """Before a run rides on masters left by an earlier run: each hop's (the jump host first) must still carry a
    no-op within MASTER_CHECK_SECONDS, else it is stopped and its socket removed (the run then connects afresh).
    Once per hop and process."""
    for hop in target.chain():
        socket = control / connection_id(hop)
        with _control_lock:
            if socket.name in _checked:
                continue
            _checked.add(socket.name)
        if not socket.exists():
            continue
        if _master(config, hop, "check"):
            # ControlMaster=no: ride on the master or fail, never open a connection of its own.
            noop = ["ssh", "-F", str(config), "-o", "ControlMaster=no", hop.name, "true"]
            try:
                alive = subprocess.run(
                    noop, stdin=subprocess.DEVNULL, capture_output=True, timeout=MASTER_CHECK_SECONDS
                )
                if alive.returncode == 0:
                    continue
            except (OSError, subprocess.TimeoutExpired):
                pass
            _master(config, hop, "exit")
        with contextlib.suppress(OSError):
            socket.unlink()


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

    `multiplex=True` shares one master connection per node with this process's other runs and the next program
    run's (control_dir, check_masters); `False` makes every connection its own handshake.
    """
    with tempfile.TemporaryDirectory(prefix="spark-llm-ssh-") as tmp:
        d = Path(tmp)
        (d / "known_hosts").write_text(known_hosts(target))
        control = control_dir() if multiplex else None
        (d / "config").write_text(ssh_config(target, d / "known_hosts", control))
        if control is not None:
            check_masters(d / "config", target, control)
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
