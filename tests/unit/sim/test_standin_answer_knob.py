"""The stand-in's answer-salt knob: answers stay deterministic, change while the salt file exists, and come back
when it is removed, all in one running engine (what the canary test of `spark-llm status` relies on)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.unit.sim.standin_group import SERVED_MODEL_NAME, EngineGroup, post_head, wait_until

CANARY = {"model": SERVED_MODEL_NAME, "prompt": "Count from one to ten: one, two, three,", "max_tokens": 8}
CHAT = {"model": SERVED_MODEL_NAME, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8}


def _answers(group: EngineGroup) -> tuple[str, str]:
    completion = post_head(group, "/v1/completions", {**CANARY, "temperature": 0})["choices"][0]["text"]
    chat = post_head(group, "/v1/chat/completions", {**CHAT, "temperature": 0})["choices"][0]["message"]["content"]
    return completion, chat


def test_a_salt_file_changes_a_running_engines_answers_until_it_is_removed(
    new_group: Callable[..., EngineGroup], tmp_path: Path
) -> None:
    salt = tmp_path / "answer-salt"
    group = new_group(1)
    group.start(0, env={"STANDIN_ANSWER_SALT_FILE": str(salt)})
    wait_until(lambda: group.nodes[0].health() == 200, "the head to be healthy")
    plain = _answers(group)
    assert _answers(group) == plain

    salt.write_text("changed kernel\n")
    salted = _answers(group)
    assert salted[0] != plain[0] and salted[1] != plain[1]
    assert _answers(group) == salted

    salt.write_text("another kernel\n")
    assert _answers(group)[0] not in (plain[0], salted[0])

    salt.unlink()
    assert _answers(group) == plain
