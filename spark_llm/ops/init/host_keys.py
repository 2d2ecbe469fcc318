"""Host keys for `spark-llm init`: scanned as the program will reach each node (the head from here, a worker from
the head), shown as fingerprints and accepted by the person (or `--accept SHA256:...`), then pinned for every ssh
init makes. Never `StrictHostKeyChecking=no` or `accept-new`: the first use is the one an attacker would pick.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from spark_llm.config.nodes import keyscan_type
from spark_llm.plan.hosts import SshHost
from spark_llm.remote import runner
from spark_llm.remote.ssh import fingerprint

# The key pinned is the strongest the node offers, in OpenSSH's own order of preference.
PREFERENCE = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa")


class HostKeyError(RuntimeError):
    """A node's key was not scanned, not accepted, or changed: one line, what to do next."""


def best_key(scan_output: str) -> str | None:
    """Pure: the preferred `TYPE BASE64` line of `ssh-keyscan` output, or None when it shows no key."""
    found = runner.keyscan_keys(scan_output)
    return next((found[t] for t in PREFERENCE if t in found), None)


def scan(address: str, port: int, via: SshHost | None = None) -> str | None:
    """The key `address` presents: ssh-keyscan from this machine, or (a worker) from the head `via`."""
    return best_key(runner.keyscan(address, port, via, timeout=runner.KEYSCAN_SECONDS * 4))


def describe(key: str) -> str:
    """`ED25519 SHA256:...`, as `ssh-keygen -lf` names a key."""
    kind = keyscan_type(key.split()[0]).upper()
    return f"{kind} {fingerprint(key)}"


def accept(
    name: str,
    where: str,
    key: str,
    accepted: Iterable[str],
    *,
    ask: Callable[[str], str] | None = None,
) -> str:
    """How `key` of node `name` (at `where`) was accepted: by `--accept`, or by the person at the terminal.
    Raises HostKeyError when it was not."""
    shown = describe(key)
    if fingerprint(key) in set(accepted):
        return f"{shown}, accepted with --accept"
    key_file = f"/etc/ssh/ssh_host_{keyscan_type(key.split()[0])}_key.pub"
    check = f"on {name}'s console: `ssh-keygen -lf {key_file}`"
    if ask is None and sys.stdin.isatty():
        ask = input
    if ask is None:
        raise HostKeyError(
            f"{name} ({where}) presents {shown}; compare it {check}, then run init again with"
            f" --accept {fingerprint(key)}"
        )
    answer = ask(f"{name} ({where}) presents {shown}. Compare it {check}. Is it that node's key? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise HostKeyError(f"{name}'s host key {shown} was not accepted: nothing written")
    return f"{shown}, accepted at the terminal"
