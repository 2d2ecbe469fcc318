"""`spark-llm init`'s last step: the stack (created when it does not exist) and its file, all or nothing.

`pulumi stack init` writes Pulumi.STACK.yaml itself (the passphrase provider's encryptionsalt): that file's keys
are kept in ours. A failure after the stack was made removes the stack again, and an existing file (--force) is put
back: nothing is left half-made.
"""

from __future__ import annotations

import contextlib
import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from spark_llm.config import NAMESPACE
from spark_llm.ops.pulumi_cli import PulumiCli, PulumiError


def pulumi_keys(path: Path) -> dict[str, Any]:
    """The top-level keys besides `config` of a stack file (what Pulumi keeps there); {} when there is none."""
    with contextlib.suppress(OSError, yaml.YAMLError):
        existing = yaml.safe_load(path.read_text()) or {}
        if isinstance(existing, dict):
            return {k: v for k, v in existing.items() if k != "config"}
    return {}


def with_pulumi_keys(text: str, keys: dict[str, Any]) -> str:
    """Pure: `text` with Pulumi's keys it lacks inserted after the header comment."""
    present = yaml.safe_load(text) or {}
    block = "".join(
        yaml.safe_dump({k: v}, default_flow_style=False, width=1000) for k, v in keys.items() if k not in present
    )
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    return "".join(lines[:at]) + block + "".join(lines[at:])


def stacks(pulumi: PulumiCli) -> set[str]:
    listed = json.loads(pulumi.capture("stack", "ls", "--json"))
    return {str(s.get("name", "")).split("/")[-1] for s in listed}


def write(pulumi: PulumiCli, stack: str, target: Path, text: str, say: Callable[[str], object]) -> None:
    created = False
    backup = None
    if target.exists():
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        backup = target.with_name(f"{target.name}.bak-{stamp}")
        target.replace(backup)
    try:
        if stack not in stacks(pulumi):
            pulumi.capture("stack", "init")
            created = True
        # Pulumi's keys: of the file `pulumi stack init` just wrote, or of the file replaced (an existing stack).
        text = with_pulumi_keys(text, pulumi_keys(target) or (pulumi_keys(backup) if backup else {}))
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(target)
    except BaseException:
        if created:
            with contextlib.suppress(PulumiError):
                pulumi.capture("stack", "rm", "--yes")
        if backup is not None:
            backup.replace(target)
        raise
    say(f"wrote {target}" + (f" (the old file: {backup.name})" if backup else "") + "\n")
    if created:
        say(f"created the stack {stack}\n")
    say(
        "secrets never go in the file; set them with Pulumi (it asks for the value):\n"
        f"  pulumi config set --secret {NAMESPACE}:apiKey --stack {stack}    # the key clients must send (optional)\n"
        f"  pulumi config set --secret {NAMESPACE}:hfToken --stack {stack}   # a gated Hugging Face model\n"
        f"next: pulumi preview --stack {stack}, then pulumi up --stack {stack}\n"
    )
