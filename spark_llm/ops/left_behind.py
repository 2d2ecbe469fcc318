"""What a pulumi command leaves running when it dies before it could end its plugins, and ending it.

Pulumi starts each plugin (the language host, the providers) in a process group of its own and ends them itself
when it ends: SIGINT, 5 s, then SIGKILL (sdk/go/common/resource/plugin/plugin.go, `Plugin.Close`). Between starting
the language host and setting its SIGINT handler (~50 ms, measured with 3.274.1) a SIGINT kills `pulumi` outright
(exit -2): its plugins are then nobody's, and the language host checks that its engine is alive only every 5 minutes.
A SIGKILL after our own grace (PulumiCli's `_end`) does the same. This module lets the CLI do Pulumi's part then.

What was below `pulumi` just before the Ctrl-C (`process_tree`) misses a plugin started after that look, and once
`pulumi` is gone its orphans are init's children. But PulumiCli starts `pulumi` as the leader of a session of its
own, and a plugin gets only a process group of its own: every process it started is still in that session
(`session_members`), whenever it started and whoever its parent is now.

A `pulumi` ended so may also have left the stack's lock (`locks_left_by`): the file backend's lock file names the
process that took it, so the one our own ended command took is released, and no other.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

GRACE_SECONDS = 5.0  # Pulumi's own, before it kills a plugin that did not end on SIGINT


def _ps(column: str) -> list[tuple[int, int]]:
    """(pid, `column`) of every process now (`ps`: Linux and macOS). Empty when ps cannot say."""
    try:
        table = subprocess.run(
            ["ps", "-A", "-o", "pid=", "-o", f"{column}="], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = (row.split() for row in table.splitlines())
    return [(int(f[0]), int(f[1])) for f in rows if len(f) == 2 and f[0].isdigit() and f[1].isdigit()]


def process_tree(pid: int) -> list[int]:
    """Every process below `pid` now, nearest first."""
    children: dict[int, list[int]] = {}
    for child, parent in _ps("ppid"):
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    queue = list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        found.append(child)
        queue.extend(children.get(child, []))
    return found


def session_members(sid: int) -> list[int]:
    """Every process of session `sid` now but its leader."""
    return [pid for pid, session in _ps("sess") if session == sid and pid != sid]


def running(pid: int) -> bool:
    """Alive and not a zombie (an ended orphan its new parent has not reaped yet is not running)."""
    if Path("/proc/self/stat").exists():  # Linux; macOS has no /proc
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_left_behind(pids: list[int], grace: float = GRACE_SECONDS) -> list[int]:
    """End what of `pids` still runs as Pulumi would have: SIGINT, `grace` seconds, then SIGKILL. Returns the pids it
    had to signal (empty when nothing was left)."""
    left = [pid for pid in pids if running(pid)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    while any(running(pid) for pid in left) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        if running(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return left


def _file_backend(environ: dict[str, str]) -> Path | None:
    """The state's directory when Pulumi keeps it in files (`file://`: PULUMI_BACKEND_URL, else the backend
    `pulumi login` chose); None for any other backend."""
    url = environ.get("PULUMI_BACKEND_URL", "")
    if not url:
        home = Path(environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
        with contextlib.suppress(OSError, ValueError, AttributeError):
            url = json.loads((home / "credentials.json").read_text()).get("current", "")
    if not url.startswith("file://"):
        return None
    path = url.removeprefix("file://").split("?", 1)[0]
    return Path(path).expanduser() if path else Path.home()


def locks_left_by(pid: int, environ: dict[str, str]) -> list[Path]:
    """The stack locks (the file backend's `.pulumi/locks/**/*.json`) that pulumi process `pid`, of this host, took
    and did not release: a SIGINT between taking a stack's lock and setting its handler (Pulumi 3.274.1's DIY
    backend locks before it starts the update that sets it, reading and decrypting the state meanwhile) ends it
    outright, its lock left, and every later `up` refused ("the stack is currently locked"). Another process's lock,
    or another host's, is never listed."""
    root = _file_backend(environ)
    if root is None:
        return []
    found = []
    for path in sorted((root / ".pulumi" / "locks").glob("**/*.json")):
        with contextlib.suppress(OSError, ValueError):
            lock = json.loads(path.read_text())
            if lock.get("pid") == pid and lock.get("hostname") == socket.gethostname():
                found.append(path)
    return found


def release_locks_of(pid: int, environ: dict[str, str]) -> list[Path]:
    """Remove the locks `locks_left_by` finds (`pid` has ended: nothing else will); returns them."""
    removed = []
    for path in locks_left_by(pid, environ):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed
