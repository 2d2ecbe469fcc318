"""The operator's ssh private key files (`sshKeyPath`, `nodes[].keyPath`): where they are, read and mode-checked.

Read by the program (their contents become pulumi-command's `private_key`, a secret) and checked by the operator
CLI before it runs ssh. A key that others can read is refused as OpenSSH refuses it ("UNPROTECTED PRIVATE KEY
FILE"): pulumi-command's Go ssh would take it silently, and the docker provider's OpenSSH would then fail.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from spark_llm.config import NAMESPACE, StackConfig


class KeyFileError(ValueError):
    """A configured ssh key file cannot be used; the message names the config key and the fix."""


@dataclass(frozen=True)
class KeyFile:
    path: str
    """Absolute path on this machine."""
    config_key: str
    """The stack config key that names it (for errors)."""


def key_files(cfg: StackConfig) -> dict[str, KeyFile]:
    """Every node's key file by node name, with the key of the config that names it."""
    out = {}
    for i, node in enumerate(cfg.nodes):
        if node.key_path:
            out[node.name] = KeyFile(os.path.expanduser(node.key_path), f"{NAMESPACE}:nodes[{i}].keyPath")
        else:
            out[node.name] = KeyFile(os.path.expanduser(cfg.ssh_key_path), f"{NAMESPACE}:sshKeyPath")
    return out


def unprotected(key: KeyFile) -> str | None:
    """Why OpenSSH would refuse the key file for its mode (group or others may access it), or None.

    A missing file is not this check's business (reading it names that).
    """
    try:
        mode = stat.S_IMODE(os.stat(key.path).st_mode)
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return (
        f"{key.config_key}: the ssh private key {key.path} is open to group or others (mode {mode:04o}); ssh refuses it"
        f" (UNPROTECTED PRIVATE KEY FILE). Run `chmod 600 {key.path}`"
    )


def check_modes(cfg: StackConfig) -> None:
    """Raise KeyFileError naming every key file that group or others may access."""
    problems = sorted({p for key in key_files(cfg).values() if (p := unprotected(key))})
    if problems:
        raise KeyFileError("\n".join(problems) + "\nNothing was run on any node.")


def read_keys(cfg: StackConfig) -> dict[str, str]:
    """The private keys' contents by path, read once at program run (preview too).

    A missing, unreadable or unprotected key stops the program before any resource is declared: nothing runs on
    any node, and no state records a connection that cannot work.
    """
    contents: dict[str, str] = {}
    problems: list[str] = []
    seen: set[str] = set()
    for key in key_files(cfg).values():
        if key.path in seen:
            continue
        seen.add(key.path)
        try:
            text = Path(key.path).read_text()
        except OSError as exc:
            problems.append(f"{key.config_key}: cannot read the ssh private key {key.path}: {exc.strerror}")
            continue
        if "PRIVATE KEY" not in text:
            problems.append(f"{key.config_key}: {key.path} is not an ssh private key (the .pub file?)")
            continue
        mode_problem = unprotected(key)
        if mode_problem:
            problems.append(mode_problem)
            continue
        contents[key.path] = text
    if problems:
        raise KeyFileError(
            "\n".join(problems)
            + f"\nSet it to a private key the nodes accept, readable by you alone (e.g. `pulumi config set"
            f" {NAMESPACE}:sshKeyPath ~/.ssh/id_ed25519`). Nothing was run on any node."
        )
    return contents
