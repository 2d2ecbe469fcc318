"""After a failed start, the way back to the revision that served before (spark-llm:rollout.onFailure).

Run by the readiness gate (spark_llm.remote.readiness) on this machine when the start fails. `stop` (the default):
the error ends with the one command that brings the last good revision back. `rollback`: the gate starts that
command itself, detached (a session of its own, its log a 0600 file under ~/.local/state/spark-llm/); it waits
for the failed `pulumi up` to end and release the stack's lock (spark_llm.ops.rollback).

The command names the stack config file the failed `pulumi up` was given (`--config-file`), read from that
process's own command line: the program is not told it, and the gate runs under it (pulumi -> the command
provider -> sh -> the gate).
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

from spark_llm.group.flags import flag_values
from spark_llm.plan.readiness import Rollout
from spark_llm.plan.rollback import (
    ROLLBACK_ENV,
    STRIPPED_ENV,
    failed_rollback_note,
    model_names,
    rollback_command,
    same_revision_note,
    started_note,
    stop_note,
)
from spark_llm.plan.scripts import PROJECT_DIR
from spark_llm.remote.pulumi_process import pulumi_process

STATE_DIR = Path("~/.local/state/spark-llm").expanduser()
# The gate's parent (the provider's `sh`) when the gate started. On Ctrl-C the CLI cancels the step and the command
# provider kills that shell, not the gate (pulumi-command 1.2.1, seen on the sim): the gate, reparented, may still see
# the start fail. An interrupted `up` is the operator's decision: nothing is rolled back then. (The shell may be gone
# before this module is imported: no `pulumi` among the gate's ancestors then says the same.)
STARTED_UNDER = os.getppid()
INTERRUPTED = "The `pulumi up` was interrupted (the gate no longer runs under it): nothing is rolled back."


def config_file_of(argv: list[str], cwd: str) -> str | None:
    """Pure: the `--config-file` a pulumi command line names (absolute), or None."""
    value = next((v for v in flag_values(argv, ["--config-file"]) if v), None)
    return str(Path(cwd, value).resolve()) if value else None


def start_rollback(stack: str, config_file: str | None, wait_for: int | None, model: str | None = None) -> Path:
    """`spark-llm rollback` in a session of its own, its output in a 0600 log; returns the log's path."""
    STATE_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    log = STATE_DIR / f"rollback-{stack}-{stamp}.log"
    argv = [sys.executable, "-m", "spark_llm.ops.cli", "rollback", "--stack", stack]
    argv += ["--config-file", config_file] if config_file else []
    argv += ["--after-pid", str(wait_for)] if wait_for else []
    argv += ["--model", model] if model else []
    env = {k: v for k, v in os.environ.items() if k not in STRIPPED_ENV}
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        subprocess.Popen(
            argv,
            cwd=PROJECT_DIR,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            # Outlives the gate, the provider and the failed `pulumi up` (which it waits for).
            start_new_session=True,
        )
    finally:
        os.close(fd)
    return log


def one_of_several(config_file: Path, model: str) -> str | None:
    """`model` when the stack file lists it among several models (its rollback then names it with --model); None
    for a stack of one model, or a file that cannot be read (the rollback says what it needs)."""
    try:
        document = yaml.safe_load(config_file.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    return model if isinstance(document, dict) and model in model_names(document) else None


def after_failure(rollout: Rollout, model: str = "", *, served_before: bool = False) -> str:
    """What the gate's error says after a failed start; with `rollback`, also starts it. Never raises.

    `model`: the group's model (the gate's spec); named in the rollback command when the stack lists several.
    `served_before`: the revision that failed is the one that served last (a restart of the same revision): no
    rollback is offered or started, it would only start that revision again."""
    stack = str(rollout.get("stack") or "")
    if not stack:
        return ""
    if os.environ.get(ROLLBACK_ENV):
        return failed_rollback_note()
    if served_before:
        return same_revision_note()
    try:
        cli = pulumi_process()
    except OSError:
        cli = None
    if cli is None or os.getppid() != STARTED_UNDER:
        return INTERRUPTED
    config_file = config_file_of(cli.argv, cli.cwd)
    # A model of several: its group alone goes back (`--model`).
    several = one_of_several(Path(config_file or Path(cli.cwd, f"Pulumi.{stack}.yaml")), model) if model else None
    command = rollback_command(stack, config_file, several)
    if rollout.get("on_failure") != "rollback":
        return stop_note(command)
    try:
        log = start_rollback(stack, config_file, cli.pid, several)
    except OSError as err:
        return f"spark-llm:rollout.onFailure is rollback, but starting it failed ({err}).\n{stop_note(command)}"
    return started_note(command, str(log))
