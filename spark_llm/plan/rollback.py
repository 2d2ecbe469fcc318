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
import shlex
from collections.abc import Mapping
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

    start_time: str
    end_time: str
    config: dict[str, dict[str, Any]]
    message: str = ""

    @property
    def when(self) -> str:
        return self.end_time or self.start_time or "?"


def last_good_update(history: list[dict]) -> GoodUpdate:
    """Pure: the latest `update` whose result is `succeeded`.

    `pulumi stack history --json` lists the newest first; its `version` is 0 for every update on some backends (a
    local one), so the order is the list's, then the start time.
    """
    good = [
        (str(u.get("startTime", "")), -i, u)
        for i, u in enumerate(history)
        if isinstance(u, dict) and u.get("kind") == "update" and u.get("result") == "succeeded"
    ]
    if not good:
        raise RollbackRefusedError(
            "the stack has no earlier successful `pulumi up` to go back to (`pulumi stack history` lists none):"
            " there is no last good revision. Fix the config, then run `pulumi up`."
        )
    latest = max(good, key=lambda item: item[:2])[2]
    return GoodUpdate(
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


@dataclass(frozen=True)
class ProjectConfig:
    """What Pulumi.yaml's `config:` gives every stack; the history repeats it for each update."""

    values: dict[str, Any]
    """Keys set for every stack (`value:`): a stack file must not set them."""
    defaults: dict[str, Any]
    """Keys' defaults (`default:`): a stack file that does not set a key gets its default."""

    @classmethod
    def from_project(cls, document: Mapping[str, Any]) -> ProjectConfig:
        """Pure: from Pulumi.yaml as a document."""
        config = {k: v for k, v in (document.get("config") or {}).items() if isinstance(v, dict)}
        return cls(
            values={k: v["value"] for k, v in config.items() if "value" in v},
            defaults={k: v["default"] for k, v in config.items() if "default" in v},
        )


def _as_set(update: GoodUpdate, project: ProjectConfig) -> dict[str, Any]:
    """The update's non-secret values that a stack file sets (those equal to Pulumi.yaml's default left out)."""
    values = {}
    for key, entry in update.config.items():
        if key in project.values or not isinstance(entry, dict) or entry.get("secret"):
            continue
        value = _plain_value(entry)
        if key in project.defaults and value == project.defaults[key]:
            continue
        values[key] = value
    return values


def rollback_stack_file(update: GoodUpdate, current: Mapping[str, Any], project: ProjectConfig) -> dict[str, Any]:
    """Pure: the stack file (`Pulumi.<stack>.yaml` as a document) that deploys `update`'s config again.

    `current`: the user's stack file now; `project`: Pulumi.yaml's config. Raises RollbackRefusedError when a
    secret the update used is not in the current stack file (its ciphertext is only there).
    """
    current_config = current.get("config") or {}
    config: dict[str, Any] = dict(sorted(_as_set(update, project).items()))
    missing = []
    for key, entry in sorted(update.config.items()):
        if not isinstance(entry, dict) or not entry.get("secret"):
            continue
        secured = current_config.get(key)
        if isinstance(secured, dict) and "secure" in secured:
            config[key] = {"secure": secured["secure"]}
        else:
            missing.append(key)
    if missing:
        raise RollbackRefusedError(
            f"the last good update ({update.when}) used the secret {', '.join(missing)}, which the stack file"
            " no longer has: the history keeps no secret's value. Set it again (`pulumi config set --secret"
            f" {missing[0]} ...`), then run the rollback again; or fix the config and run `pulumi up`."
        )
    document = {k: v for k, v in current.items() if k != "config"}
    document["config"] = config
    return document


MODELS_KEY = "spark-llm:models"


def model_names(document: Mapping[str, Any]) -> list[str]:
    """Pure: the names spark-llm:models lists in a stack file document ([] for the single form or a list of one:
    one model, which a rollback of the whole stack brings back)."""
    models = (document.get("config") or {}).get(MODELS_KEY)
    names = [str(m.get("name")) for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    return names if len(names) > 1 else []


def one_model_stack_file(good: Mapping[str, Any], current: Mapping[str, Any], model: str) -> dict[str, Any]:
    """Pure: the current stack file with only `model`'s entry of spark-llm:models as the last good update had it
    (`good`: rollback_stack_file's document): its group alone goes back, every other model and key stays as the
    file has it now. Raises RollbackRefusedError when either does not list the model."""
    found = [m for m in (good.get("config") or {}).get(MODELS_KEY) or [] if isinstance(m, dict)]
    old = next((m for m in found if m.get("name") == model), None)
    if old is None:
        raise RollbackRefusedError(
            f"the last good update listed no model {model} in {MODELS_KEY} (it listed"
            f" {', '.join(str(m.get('name')) for m in found) or 'none'}): there is no earlier revision of it."
            " Nothing was changed."
        )
    config = dict(current.get("config") or {})
    now = [m for m in config.get(MODELS_KEY) or [] if isinstance(m, dict)]
    if not any(m.get("name") == model for m in now):
        raise RollbackRefusedError(
            f"the stack file no longer lists {model} in {MODELS_KEY}: `pulumi up` removes its group; there is"
            " nothing to roll back. Nothing was changed."
        )
    config[MODELS_KEY] = [old if m.get("name") == model else m for m in now]
    return {**current, "config": config}


def changed_keys(update: GoodUpdate, current: Mapping[str, Any], project: ProjectConfig) -> list[str]:
    """Pure: the non-secret keys whose value in the current stack file differs from the good update's."""
    current_config = current.get("config") or {}
    good = _as_set(update, project)
    now = {
        k: v
        for k, v in current_config.items()
        if k not in project.values
        and not (isinstance(v, dict) and "secure" in v)
        and not (k in project.defaults and v == project.defaults[k])
    }
    return sorted(k for k in set(good) | set(now) if good.get(k) != now.get(k))


def rollback_command(stack: str, config_file: str | None = None, model: str | None = None) -> str:
    """Pure: the one command that brings back the last good revision (`model`: of that model's group alone)."""
    command = f"spark-llm rollback --stack {stack}"
    command += f" --config-file {config_file}" if config_file else ""
    return command + (f" --model {shlex.quote(model)}" if model else "")


def stop_note(command: str) -> str:
    """Pure: what a failed start says under spark-llm:rollout.onFailure `stop` (the default)."""
    return (
        f"The revision that served before can serve again, on its own weights (kept on every node) and image:\n"
        f"  {command}\n"
        "(or set spark-llm:rollout.onFailure to rollback, and a failed start does that by itself)."
    )


def started_note(command: str, log_path: str) -> str:
    """Pure: what a failed start says when it started the rollback itself (spark-llm:rollout.onFailure rollback)."""
    return (
        f"spark-llm:rollout.onFailure is rollback: `{command}` started by itself; it waits for this `pulumi up` to"
        f" end, then brings back the revision that served before. Its log: {log_path}"
    )


def same_revision_note() -> str:
    """Pure: what a failed start says when the revision that failed is the one that served last (issue 41, 7: a
    failed restart of the same revision offered a rollback to itself)."""
    return (
        "This revision is the one that served last: a rollback would start it again, on the same weights and image."
        " What changed is on the nodes: `spark-llm status` names what differs from the last start that served, and"
        " `spark-llm logs` shows each node's lines."
    )


def failed_rollback_note() -> str:
    """Pure: what a failed start says when it was the rollback's own `pulumi up`."""
    return (
        "This was `spark-llm rollback`'s own `pulumi up`: the last good revision did not start either, so no other"
        " rollback follows. Look at the nodes (`spark-llm status`, `spark-llm logs`)."
    )
