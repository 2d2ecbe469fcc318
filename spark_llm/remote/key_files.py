"""The operator's ssh private key files (`sshKeyPath`, `nodes[].keyPath`): where they are, read and mode-checked.

Where they are is the plan's (spark_llm.plan.hosts.key_files, resolved once). Read by the program (their
contents become pulumi-command's `private_key`, a secret) and checked by the operator CLI before it runs ssh. A
key that others can read is refused as OpenSSH refuses it ("UNPROTECTED PRIVATE KEY FILE"): pulumi-command's Go
ssh would take it silently, and the docker provider's OpenSSH would then fail.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from spark_llm.config import NAMESPACE
from spark_llm.plan.hosts import KeyFile


class KeyFileError(ValueError):
    """A configured ssh key file cannot be used; the message names the config key and the fix."""


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


def check_keys(keys: Mapping[str, KeyFile]) -> None:
    """Raise KeyFileError as the program does (`read_keys`, the same words) for a key file (the plan's
    `key_files`) that is missing, unreadable, not a private key, or open to group or others: the operator CLI calls
    this before any ssh, so a bad key is named as `pulumi preview` names it, not as ssh's refusal."""
    read_keys(keys)


def read_keys(keys: Mapping[str, KeyFile]) -> dict[str, str]:
    """The private keys' contents by path, read once at program run (preview too).

    A missing, unreadable or unprotected key stops the program before any resource is declared: nothing runs on
    any node, and no state records a connection that cannot work.
    """
    contents: dict[str, str] = {}
    problems: list[str] = []
    seen: set[str] = set()
    for key in keys.values():
        if key.path in seen:
            continue
        seen.add(key.path)
        try:
            text = Path(key.path).read_text()
        except OSError as exc:
            problems.append(f"{key.config_key}: cannot read the ssh private key {key.path}: {exc.strerror}")
            # ssh-agent alone is not enough: pulumi-command's ssh (Go) takes the key's contents, not an agent.
            if os.environ.get("SSH_AUTH_SOCK"):
                problems.append(
                    "  (a key held only in ssh-agent is not enough: spark-llm reads the key file, whose contents"
                    " pulumi-command's ssh needs)"
                )
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
