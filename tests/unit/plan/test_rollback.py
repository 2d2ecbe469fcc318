"""The pure part of `spark-llm rollback` and of a failed start's note: which update is the last good one, the stack
file that deploys it again (secrets as the stack file's ciphertext), and the words of the error."""

from __future__ import annotations

import pytest

from spark_llm.plan.rollback import (
    GoodUpdate,
    ProjectConfig,
    RollbackRefusedError,
    changed_keys,
    failed_rollback_note,
    last_good_update,
    rollback_command,
    rollback_stack_file,
    started_note,
    stop_note,
)

PROJECT = ProjectConfig.from_project(
    {
        "config": {
            "pulumi:disable-default-providers": {"value": ["command", "docker"]},
            "spark-llm:apiKey": {"type": "string", "default": ""},
            "spark-llm:rollout": {"type": "object", "default": {"onFailure": "stop"}},
        }
    }
)
GOOD_ENGINE = {"kind": "sglang", "flags": []}
BAD_ENGINE = {"kind": "sglang", "flags": ["--mem-fraction-static", "0.97"]}


def entry(value: object, secret: bool = False) -> dict:
    """A config entry as `pulumi stack history --json` shows it."""
    if secret:
        return {"secret": True}
    if isinstance(value, dict | list):
        return {"value": "...", "objectValue": value, "secret": False}
    return {"value": str(value), "secret": False}


def update(result: str, start: str, engine: dict, **more: dict) -> dict:
    config = {
        "pulumi:disable-default-providers": entry(["command", "docker"]),
        "spark-llm:apiKey": entry(""),
        "spark-llm:rollout": entry({"onFailure": "stop"}),
        "spark-llm:engine": entry(engine),
        "spark-llm:sshKeyPath": entry("~/.ssh/id_ed25519"),
        **more,
    }
    return {"version": 0, "kind": "update", "result": result, "startTime": start, "endTime": start, "config": config}


def test_the_last_good_update_is_the_newest_succeeded_one_even_when_every_version_is_0():
    history = [
        update("failed", "2026-12-03T10:03:00.000Z", BAD_ENGINE),
        {"version": 0, "kind": "refresh", "result": "succeeded", "startTime": "2026-12-03T10:02:30.000Z"},
        update("succeeded", "2026-12-03T10:02:00.000Z", GOOD_ENGINE),
        update("succeeded", "2026-12-03T10:01:00.000Z", BAD_ENGINE),
    ]
    good = last_good_update(history)
    assert good.start_time == "2026-12-03T10:02:00.000Z"
    assert good.config["spark-llm:engine"]["objectValue"] == GOOD_ENGINE


@pytest.mark.parametrize(
    "history", [[], [update("failed", "2026-12-03T10:03:00.000Z", BAD_ENGINE)]], ids=["no-update", "only-failed"]
)
def test_no_earlier_successful_update_is_refused_with_what_to_do(history):
    with pytest.raises(RollbackRefusedError, match=r"no earlier successful `pulumi up`.*Fix the config, then run"):
        last_good_update(history)


def test_the_stack_file_takes_the_good_values_and_keeps_secrets_and_the_salt_of_the_current_file():
    good = last_good_update([update("succeeded", "t", GOOD_ENGINE, **{"spark-llm:hfToken": entry("", secret=True)})])
    current = {
        "config": {"spark-llm:engine": BAD_ENGINE, "spark-llm:hfToken": {"secure": "v1:abc"}},
        "encryptionsalt": "v1:salt",
    }
    document = rollback_stack_file(good, current, PROJECT)
    assert document == {
        "encryptionsalt": "v1:salt",
        "config": {
            "spark-llm:engine": GOOD_ENGINE,
            "spark-llm:sshKeyPath": "~/.ssh/id_ed25519",
            "spark-llm:hfToken": {"secure": "v1:abc"},  # the ciphertext, never a value
        },
    }
    # Pulumi.yaml's own values and defaults are not a stack's to set.
    assert "pulumi:disable-default-providers" not in document["config"]
    assert "spark-llm:rollout" not in document["config"] and "spark-llm:apiKey" not in document["config"]


def test_a_secret_the_good_update_used_but_the_stack_file_lost_is_refused_naming_it():
    good = last_good_update([update("succeeded", "t", GOOD_ENGINE, **{"spark-llm:apiKey": entry("", secret=True)})])
    with pytest.raises(RollbackRefusedError, match=r"used the secret spark-llm:apiKey.*pulumi config set --secret"):
        rollback_stack_file(good, {"config": {"spark-llm:engine": BAD_ENGINE}}, PROJECT)


@pytest.mark.parametrize(
    ("text", "value"), [("5", 5), ("true", True), ("0.9", 0.9), ("~/.ssh/k", "~/.ssh/k"), ('"x"', '"x"')]
)
def test_a_scalar_goes_back_as_the_stack_file_wrote_it(text, value):
    good = GoodUpdate("t", "t", {"spark-llm:x": {"value": text, "secret": False}})
    assert rollback_stack_file(good, {}, PROJECT)["config"]["spark-llm:x"] == value


def test_changed_keys_are_the_ones_the_rollback_sets_back_not_pulumi_yaml_defaults():
    good = last_good_update([update("succeeded", "t", GOOD_ENGINE)])
    current = {"config": {"spark-llm:engine": BAD_ENGINE, "spark-llm:sshKeyPath": "~/.ssh/id_ed25519"}}
    assert changed_keys(good, current, PROJECT) == ["spark-llm:engine"]


def test_the_error_prints_the_one_command_with_the_config_file_when_one_was_used():
    assert rollback_command("sim") == "spark-llm rollback --stack sim"
    command = rollback_command("sim", "/tmp/x/Pulumi.sim.yaml")
    assert command == "spark-llm rollback --stack sim --config-file /tmp/x/Pulumi.sim.yaml"
    note = stop_note(command)
    assert f"\n  {command}\n" in note and "spark-llm:rollout.onFailure" in note
    assert "Its log: /l/rollback.log" in started_note(command, "/l/rollback.log")
    assert "no other rollback follows" in failed_rollback_note()
