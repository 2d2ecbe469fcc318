"""Looking for a secret in the open on the sim: command lines sampled while a command runs, files others may read
on a node (test helpers shared by test_security.py and test_ray_security.py)."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import threading
from pathlib import Path

NODES = ("head", "worker-1")
# On a node: the homes (the remote dir is ~/spark-llm), the weights (/srv/models) and temp files.
NODE_ROOTS = ("/root", "/home", "/srv", "/tmp")


def key_needles(path: Path) -> list[str]:
    """The base64 lines of a private key file: any one of them in the open is a leak of the key."""
    return [line for line in path.read_text().splitlines() if len(line) >= 20 and "PRIVATE KEY" not in line]


def leaks(text: str, needles: dict[str, list[str]]) -> list[str]:
    return [name for name, values in needles.items() if any(v in text for v in values)]


class ArgvSampler:
    """Every process's argv on this machine (a node's processes included: one kernel), read from /proc while
    `pulumi up` runs; `seen` holds each distinct command line once."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    try:
                        with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                            self.seen.add(f.read().replace(b"\0", b" ").decode(errors="replace"))
                    except OSError:
                        pass
            self._stop.wait(0.2)

    def __enter__(self) -> ArgvSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def files_others_read(sim_cluster, node: str) -> dict[str, bytes]:
    """Every regular file under NODE_ROOTS on the node whose mode lets others read it, with its content."""
    # Only paths cross the command line (as NUL-separated find output into tar), never a secret.
    walk = (
        f"find {' '.join(NODE_ROOTS)} -xdev -type f -perm -004 -print0 2>/dev/null"
        " | tar --null --files-from=- --no-recursion -cf - 2>/dev/null"
    )
    raw = subprocess.run(
        ["docker", "exec", sim_cluster.container(node), "sh", "-c", walk], capture_output=True, timeout=300
    ).stdout
    out = {}
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r|") as archive:
        for member in archive:
            f = archive.extractfile(member)
            if f is not None:
                out["/" + member.name] = f.read()
    return out
