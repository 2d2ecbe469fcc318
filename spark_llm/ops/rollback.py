"""`spark-llm rollback`: the revision that served before serves again, through `pulumi up` (no side channel).

Runs `pulumi up` with the config of the stack's latest succeeded update (`pulumi stack history --json`, turned into
a stack file by spark_llm.plan.rollback: secrets stay the stack file's ciphertext) from a private temp directory
(0700, the file 0600, removed afterwards). The weights and the image that revision used are still on every node:
nothing is copied, the group restarts in order and the readiness gate waits for rank 0's first token. The user's
stack file is not edited: `pulumi preview` with it afterwards shows what the next `up` would do (relaunch the
revision that failed), and says that it failed to start last time.

A failed start runs this by itself under spark-llm:rollout.onFailure `rollback` (spark_llm.ops.after_failure),
with `--after-pid`: it first waits for the failed `pulumi up` to end and release the stack's lock.

In a stack of several models, `--model NAME` is required: the stack file goes back to the current one with only
that model's entry of spark-llm:models as the last good update had it, so its group alone restarts (the others'
entries and every other key stay as they are now); its history and weights are read in its own directory, and
where a relaunch replaced the weights its last good start served, the kept version is put back for its group alone
(SPARK_LLM_RESTORE_MODEL names it beside SPARK_LLM_RESTORE_WEIGHTS: the other groups keep theirs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import yaml

from spark_llm.group.serving import COMPLETIONS_PATH, serves, serving_request
from spark_llm.ops import render
from spark_llm.ops.pulumi_cli import PulumiCli, PulumiError
from spark_llm.ops.rollback_weights import RESTORE_ENV, RESTORE_MODEL_ENV, weights_to_restore
from spark_llm.ops.status import read as status_read
from spark_llm.plan.container import LABEL_REVISION
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.rollback import (
    MODELS_KEY,
    ROLLBACK_ENV,
    ProjectConfig,
    RollbackRefusedError,
    changed_keys,
    last_good_update,
    model_names,
    one_model_stack_file,
    rollback_stack_file,
)
from spark_llm.plan.stack import ModelChoiceError
from spark_llm.remote.history import read_history
from spark_llm.remote.observe import observe_stack

USES_PLAN = False
"""The CLI loads no plan from the current config first: it may be the one that does not start (or not parse)."""
WAIT_SECONDS = 600.0
LOCKED = "currently locked"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # A failed start's own rollback waits for the `pulumi up` it ran under (spark_llm.ops.after_failure).
    parser.add_argument("--after-pid", type=int, help=argparse.SUPPRESS)


def say(text: str) -> None:
    print(f"spark-llm rollback: {text}", flush=True)


def _wait_for_exit(pid: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            pass
        time.sleep(0.2)
    raise PulumiError(f"the failed `pulumi up` (pid {pid}) did not end within {WAIT_SECONDS:.0f} s")


def _write_private(path: Path, document: dict) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump(document, out, sort_keys=False)


def _up(back: PulumiCli, message: str, deadline: float) -> int:
    """`pulumi up` with the good config, again while the failed run still holds the stack's lock."""
    while True:
        code, output = back.stream("up", "--yes", "--skip-preview", "--message", message, config=True)
        if code == 0 or LOCKED not in output or time.monotonic() > deadline:
            return code
        time.sleep(1.0)


def _last_failure_at(plan: DeploymentPlan) -> datetime | None:
    """When the latest failed start was recorded (the head's history; the gate's clock is this machine's)."""
    for entry in reversed(read_history(plan.head.ssh, plan.history_path)):
        try:
            if entry.get("failed"):
                return datetime.fromisoformat(entry["at"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


def _first_completion(plan: DeploymentPlan, deadline: float) -> datetime | None:
    """The time the group first serves (spark_llm.group.serving: the one-token completion), as a client sees it."""
    body = json.dumps(serving_request(plan.model_name)).encode()
    headers = {"Content-Type": "application/json"}
    if plan.api_key:
        headers["Authorization"] = f"Bearer {plan.api_key}"
    while time.monotonic() < deadline:
        request = urllib.request.Request(f"{plan.endpoint}{COMPLETIONS_PATH}", body, headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                if serves(response.status):
                    return datetime.now().astimezone()
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.5)
    return None


def already_serving(plan: DeploymentPlan, digest: str) -> str:
    """What serves when the last good revision already runs on every member and answers (its weights on every
    node: the caller checked), else "": a second rollback in a row must change nothing (issue 41, 5).

    The members' containers are read first (the program's own probe: their labels), and the group's answer is asked
    only when every member runs that revision: after a failed start another revision runs, and one that wedged would
    hold the question for its whole timeout before the rollback could begin (16 s on the sim)."""
    [seen] = observe_stack([(plan, lambda _node: "")])
    if not all(
        o.error is None and o.engine.running and o.engine.labels.get(LABEL_REVISION) == plan.group_revision
        for o in seen.values()
    ):
        return ""
    statuses, health, _ = status_read.collect(plan)
    running = all(s.state == "running" and s.revision == plan.group_revision for s in statuses)
    if not statuses or not running or health is None or not serves(health.answer):
        return ""
    weights = f" on weights {digest[:16]}" if digest else ""
    return f"revision {plan.group_revision}, the last good one, already serves{weights} on every node"


def run(pulumi: PulumiCli, plan: DeploymentPlan | None, args: argparse.Namespace) -> int:
    """With --json, what it says (and the rollback's `pulumi up`) goes to stderr, and one JSON object to stdout:
    `ok`, and `refused` (why there is no rollback), `error`, or what serves again."""
    if not getattr(args, "json", False):
        return _run(pulumi, args, {})
    result: dict = {}
    with contextlib.redirect_stdout(sys.stderr):
        code = _run(pulumi, args, result)
    render.emit_json({"ok": code == 0, **result})
    return code


def _run(pulumi: PulumiCli, args: argparse.Namespace, result: dict) -> int:
    deadline = time.monotonic() + WAIT_SECONDS
    if args.after_pid:
        say(f"waiting for the failed `pulumi up` (pid {args.after_pid}) to end")
        _wait_for_exit(args.after_pid, deadline)
    # As the program does: a relative path in the config (local weights) is relative to the project.
    os.chdir(pulumi.cwd)
    stack = pulumi.stack or pulumi.capture("stack", "--show-name").strip()
    # A relative --config-file is the project's, as the pulumi commands run there take it (spark_llm.ops.pulumi_cli).
    stack_file = pulumi.cwd / (pulumi.config_file or f"Pulumi.{stack}.yaml")
    current = (yaml.safe_load(stack_file.read_text()) if stack_file.exists() else None) or {}
    project = ProjectConfig.from_project(yaml.safe_load((pulumi.cwd / "Pulumi.yaml").read_text()) or {})
    model = getattr(args, "model", None)
    try:
        update = last_good_update(json.loads(pulumi.capture("stack", "history", "--json")))
        document = rollback_stack_file(update, current, project)
        several = model_names(document) or model_names(current)
        if several:
            if model is None:
                raise RollbackRefusedError(
                    f"the stack serves several models: name the one to roll back with --model ({', '.join(several)});"
                    " nothing was changed"
                )
            # That model's group alone goes back; every other model and key stays as the stack file has it.
            document = one_model_stack_file(document, current, model)
    except RollbackRefusedError as err:
        sys.stderr.write(f"spark-llm rollback: {err}\n")
        result["refused"] = str(err)
        return 2
    if several:
        changed = [f"{MODELS_KEY}[{model}]"] if document != current else []
        whose = f"{model}'s entry of {MODELS_KEY} from its"
    else:
        changed = changed_keys(update, current, project)
        whose = "its"
    say(
        f"the update of {update.when} is the last good one; `pulumi up` with {whose}"
        f" config ({', '.join(changed) or 'no key'} as then; {stack_file} is left as it is)"
    )
    os.environ[ROLLBACK_ENV] = "1"  # the rollback's own start, if it fails, starts no other rollback
    with tempfile.TemporaryDirectory(prefix="spark-llm-rollback-") as private:  # mode 0700
        config_file = Path(private) / f"Pulumi.{stack}.yaml"
        _write_private(config_file, document)
        back = PulumiCli(stack=stack, config_file=str(config_file), cwd=pulumi.cwd)
        # The weights that revision served with, put back where a relaunch replaced them (issue 31, 1).
        try:
            target = back.load_plan(model)
            weights = weights_to_restore(target)
        except (RollbackRefusedError, ModelChoiceError) as err:
            sys.stderr.write(f"spark-llm rollback: {err}\n")
            result["refused"] = str(err)
            return 2
        say(weights.note)
        if not weights.restore and (serving := already_serving(target, weights.digest)):
            say(f"{serving}: nothing to roll back, nothing was changed")
            result.update(revision=target.group_revision, served=True, unchanged=True)
            return 0
        if weights.digest:
            # Pinned, whether a node needs it put back or not: the rollback's `up` never copies from the operator's
            # source (edited since, maybe), and the version kept on every node stays kept at its start.
            os.environ[RESTORE_ENV] = weights.digest
            if several and model is not None:
                os.environ[RESTORE_MODEL_ENV] = model  # that model's group alone: the others keep their weights
        result["weights"] = weights.digest or None
        code = _up(back, f"spark-llm rollback to the update of {update.when}", deadline)
        if code != 0:
            sys.stderr.write(f"spark-llm rollback: the rollback's `pulumi up` failed (exit {code}; its output above)\n")
            result["error"] = f"the rollback's `pulumi up` failed (exit {code})"
            return 1
        good = back.load_plan(model)  # after the up: the first completion is timed as soon as the up ends
        served = _first_completion(good, deadline)
    failed = _last_failure_at(good)
    try:
        asked = pulumi.load_plan(model).group_revision
    except (PulumiError, ValueError):
        asked = None  # the stack file's config does not parse: the rollback does not need it
    if served is None:
        took = "nothing within the wait (see `spark-llm status`)"
    elif failed is None:
        took = "(no failed start recorded on the head to time it from)"
    else:
        took = f"{(served - failed).total_seconds():.1f} s after the failed start ({failed.isoformat()})"
    bytes_note = f" (weights {weights.digest[:16]})" if weights.digest else ""
    say(f"revision {good.group_revision}{bytes_note} serves again: its first completion answered {took}.")
    result.update(
        revision=good.group_revision,
        update=update.when,
        first_completion=took,
        config_asks_for=asked,
        served=bool(served),
    )
    if asked == good.group_revision:
        # Nothing had failed since (the config asks for the revision that serves): no rollback to warn about.
        say(f"{stack_file} asks for this same revision: `pulumi preview` shows no change to the engine group.")
        return 0 if served else 1
    relaunch = f"revision {asked}" if asked else "the config's revision"
    say(
        f"the deployed revision is a rollback: {stack_file} still asks for {relaunch}, which failed to start."
        " `pulumi preview` shows what the next `pulumi up` would do (relaunch it): fix the config first, then"
        " `pulumi up`."
    )
    return 0 if served else 1
