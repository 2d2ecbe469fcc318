"""The last good revision, back: what `spark-llm rollback` deploys, and what a failed start says about it.

Pure. `spark-llm rollback` (spark_llm.ops.rollback) runs `pulumi up` with the config of the stack's latest
succeeded update, as `pulumi stack history --json` keeps it; this module turns that history into a stack file.
Non-secret values come from the history (objects as objects); a secret comes from the current stack file as its
ciphertext (the history holds no secret's value), and so do the file's own top-level settings (`encryptionsalt`,
`secretsprovider`, `encryptedkey`): the rollback's config file decrypts as the user's does and never holds a
secret in plain text. The user's own stack file is never edited: afterwards `pulumi preview` with it shows what
the next `pulumi up` would do (relaunch the revision that failed).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

ROLLBACK_ENV = "SPARK_LLM_ROLLBACK"
"""Set in the environment of the rollback's own `pulumi up`: if that start fails too, no other rollback starts."""
# What a detached rollback must not inherit from the failed program's gate: the program's own config (it would
# override the rollback's config file) and the failed run's trace endpoint.
STRIPPED_ENV = ("PULUMI_CONFIG", "PULUMI_LOG_OTLP_ENDPOINT")


class RollbackRefusedError(ValueError):
    """There is nothing to roll back to, or the rollback cannot be done safely; the message says why and what to do."""


@dataclass(frozen=True)
class GoodUpdate:
    """The stack's latest succeeded update, as `pulumi stack history --json` shows it."""

    version: int
    start_time: str
    end_time: str
    config: dict[str, dict[str, Any]]
    message: str = ""


def last_good_update(history: list[dict]) -> GoodUpdate:
    """Pure: the latest `update` whose result is `succeeded` (history is newest first, as pulumi prints it)."""
    updates = [u for u in history if isinstance(u, dict) and u.get("kind") == "update"]
    good = [u for u in updates if u.get("result") == "succeeded"]
    if not good:
        raise RollbackRefusedError(
            "the stack has no earlier successful `pulumi up` to go back to (`pulumi stack history` lists none):"
            " there is no last good revision. Fix the config, then run `pulumi up`."
        )
    latest = max(good, key=lambda u: int(u.get("version", 0)))
    return GoodUpdate(
        version=int(latest.get("version", 0)),
        start_time=str(latest.get("startTime", "")),
        end_time=str(latest.get("endTime", "")),
        config=dict(latest.get("config") or {}),
        message=str(latest.get("message", "")),
    )


def _plain_value(entry: Mapping[str, Any]) -> Any:
    """A history config entry as the stack file writes it: objects and lists as themselves, numbers and booleans
    as such (Pulumi hands every value over as text), anything else as its text."""
    if "objectValue" in entry:
        return entry["objectValue"]
    text = entry.get("value", "")
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return text
    return value if isinstance(value, bool | int | float) else text


def rollback_stack_file(
    update: GoodUpdate, current: Mapping[str, Any], project_values: Collection[str] = ()
) -> dict[str, Any]:
    """Pure: the stack file (`Pulumi.<stack>.yaml` as a document) that deploys `update`'s config again.

    `current`: the user's stack file now; `project_values`: keys Pulumi.yaml sets for every stack (`value:`), which
    the history repeats but a stack file must not. Raises RollbackRefusedError when a secret the update used is not in
    the current stack file (its ciphertext is only there).
    """
    current_config = current.get("config") or {}
    config: dict[str, Any] = {}
    missing = []
    for key, entry in sorted(update.config.items()):
        if key in project_values or not isinstance(entry, dict):
            continue
        if entry.get("secret"):
            secured = current_config.get(key)
            if isinstance(secured, dict) and "secure" in secured:
                config[key] = {"secure": secured["secure"]}
            else:
                missing.append(key)
            continue
        value = _plain_value(entry)
        if value == "" and key not in current_config:
            continue  # a key Pulumi.yaml defaults to "" (unset): left to that default
        config[key] = value
    if missing:
        raise RollbackRefusedError(
            f"update {update.version} (the last good one) used the secret {', '.join(missing)}, which the stack file"
            " no longer has: the history keeps no secret's value. Set it again (`pulumi config set --secret"
            f" {missing[0]} ...`), then run the rollback again; or fix the config and run `pulumi up`."
        )
    document = {k: v for k, v in current.items() if k != "config"}
    document["config"] = config
    return document


def changed_keys(update: GoodUpdate, current: Mapping[str, Any], project_values: Collection[str] = ()) -> list[str]:
    """Pure: the non-secret keys whose value in the current stack file differs from the good update's."""
    current_config = current.get("config") or {}
    good = {k: _plain_value(e) for k, e in update.config.items() if isinstance(e, dict) and not e.get("secret")}
    keys = (set(good) | set(current_config)) - set(project_values)
    return sorted(
        k
        for k in keys
        if not (isinstance(current_config.get(k), dict) and "secure" in current_config[k])
        and good.get(k, "") != current_config.get(k, "")
    )


def rollback_command(stack: str, config_file: str | None = None) -> str:
    """Pure: the one command that brings back the last good revision."""
    command = f"spark-llm rollback --stack {stack}"
    return command + (f" --config-file {config_file}" if config_file else "")


def stop_note(command: str) -> str:
    """Pure: what a failed start says under spark-llm:rollout.onFailure `stop` (the default)."""
    return (
        f"The revision that served before can serve again (no weights copied, its image is still on every node):\n"
        f"  {command}\n"
        "(or set spark-llm:rollout.onFailure to rollback, and a failed start does that by itself)."
    )


def started_note(command: str, log_path: str) -> str:
    """Pure: what a failed start says when it started the rollback itself (spark-llm:rollout.onFailure rollback)."""
    return (
        f"spark-llm:rollout.onFailure is rollback: `{command}` started by itself; it waits for this `pulumi up` to"
        f" end, then brings back the revision that served before. Its log: {log_path}"
    )


def failed_rollback_note() -> str:
    """Pure: what a failed start says when it was the rollback's own `pulumi up`."""
    return (
        "This was `spark-llm rollback`'s own `pulumi up`: the last good revision did not start either, so no other"
        " rollback follows. Look at the nodes (`spark-llm status`, `spark-llm logs`)."
    )
