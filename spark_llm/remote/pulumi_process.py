"""The `pulumi` CLI process a program or a step runs under, and its command line.

Pulumi does not tell a program (or a local command it runs) which flags the CLI got: `--config-file` (the readiness
gate's rollback command names it) or `--target` / `--replace` (components.cluster keeps one member of the engine group
from restarting alone). The nearest ancestor process whose program is `pulumi` has them.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

ANCESTORS_LOOKED_AT = 12


@dataclass(frozen=True)
class PulumiProcess:
    """The `pulumi` CLI process this gate runs under."""

    pid: int
    argv: list[str]
    cwd: str


def _parent_and_argv(pid: int) -> tuple[int, list[str], str] | None:
    """(parent pid, argv, cwd) of a process: /proc where there is one, else `ps` (macOS)."""
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        try:
            stat = (proc / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            argv = [a for a in (proc / "cmdline").read_bytes().decode(errors="replace").split("\0") if a]
            cwd = os.readlink(proc / "cwd")
        except (OSError, ValueError, IndexError):
            return None
        return parent, argv, cwd
    try:
        out = subprocess.run(
            ["ps", "-o", "ppid=", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        parent_text, _, args = out.partition(" ")
        return int(parent_text), args.split(), os.getcwd()
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def pulumi_process() -> PulumiProcess | None:
    """The nearest ancestor whose program is `pulumi` (None when there is none: the gate run by hand)."""
    pid = os.getppid()
    for _ in range(ANCESTORS_LOOKED_AT):
        found = _parent_and_argv(pid)
        if found is None:
            return None
        parent, argv, cwd = found
        if argv and Path(argv[0]).name == "pulumi":
            return PulumiProcess(pid, argv, cwd)
        if parent <= 1:
            return None
        pid = parent
    return None
