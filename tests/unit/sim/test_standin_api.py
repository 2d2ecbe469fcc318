"""The stand-in engine's OpenAI API on the head of a formed group over loopback: models, completions, chat,
max_tokens, stop strings, streaming, the context length; workers serve only /health."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from tests.unit.sim.standin_group import (
    FINGERPRINT,
    SERVED_MODEL_NAME,
    EngineGroup,
    http_get,
    http_post,
    post_head,
    stream_head,
    wait_until,
)


@pytest.fixture(scope="module")
def formed_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineGroup]:
    """A healthy head + 2 workers, shared by the API tests."""
    group = EngineGroup(tmp_path_factory.mktemp("formed"), 3, extra_args=("--context-length", "256"))
    try:
        for rank in range(3):
            group.start(rank)
        wait_until(lambda: group.nodes[0].health() == 200, "the formed group's head to be healthy")
        yield group
    finally:
        group.stop()


def test_models_lists_the_served_model_name(formed_group: EngineGroup) -> None:
    status, body = http_get(f"{formed_group.nodes[0].url}/v1/models")
    assert status == 200
    models = json.loads(body)["data"]
    assert [model["id"] for model in models] == [SERVED_MODEL_NAME]
    assert models[0]["owned_by"] == FINGERPRINT


def test_completion_returns_deterministic_text_and_usage(formed_group: EngineGroup) -> None:
    payload = {"model": SERVED_MODEL_NAME, "prompt": "The capital of France is", "max_tokens": 12}
    first = post_head(formed_group, "/v1/completions", payload)
    second = post_head(formed_group, "/v1/completions", payload)
    assert first["system_fingerprint"] == FINGERPRINT
    assert first["object"] == "text_completion"
    assert first["choices"][0]["text"].strip()
    assert first["choices"][0]["text"] == second["choices"][0]["text"]
    usage = first["usage"]
    assert usage["prompt_tokens"] == 5
    assert 0 < usage["completion_tokens"] <= 12
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_chat_completion_returns_an_assistant_message_and_usage(formed_group: EngineGroup) -> None:
    response = post_head(
        formed_group,
        "/v1/chat/completions",
        {
            "model": SERVED_MODEL_NAME,
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 20,
        },
    )
    assert response["system_fingerprint"] == FINGERPRINT
    message = response["choices"][0]["message"]
    assert message["role"] == "assistant"
    assert message["content"].strip()
    assert response["usage"]["prompt_tokens"] > 0
    assert 0 < response["usage"]["completion_tokens"] <= 20


@pytest.mark.parametrize("max_tokens", [0, 1, 3])
def test_max_tokens_caps_the_completion(formed_group: EngineGroup, max_tokens: int) -> None:
    response = post_head(formed_group, "/v1/completions", {"prompt": "count to ten", "max_tokens": max_tokens})
    assert response["usage"]["completion_tokens"] == max_tokens
    assert len(response["choices"][0]["text"].split()) == max_tokens
    assert response["choices"][0]["finish_reason"] == "length"


def test_stop_string_cuts_the_completion(formed_group: EngineGroup) -> None:
    payload = {"prompt": "stop here please", "max_tokens": 30}
    full = post_head(formed_group, "/v1/completions", payload)["choices"][0]["text"]
    stop_word = full.split()[2]
    cut = post_head(formed_group, "/v1/completions", {**payload, "stop": [f" {stop_word}"]})["choices"][0]
    assert cut["text"] == full[: full.index(f" {stop_word}")]
    assert cut["finish_reason"] == "stop"


@pytest.mark.parametrize(
    ("path", "payload", "text_of"),
    [
        ("/v1/completions", {"prompt": "stream me", "max_tokens": 8}, lambda choice: choice.get("text", "")),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "stream me"}], "max_tokens": 8},
            lambda choice: choice.get("delta", {}).get("content", ""),
        ),
    ],
)
def test_streamed_response_matches_the_plain_one_and_ends_with_done(
    formed_group: EngineGroup, path: str, payload: dict, text_of: Callable[[dict], str]
) -> None:
    plain = post_head(formed_group, path, payload)
    events = stream_head(formed_group, path, {**payload, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert all(chunk["system_fingerprint"] == FINGERPRINT for chunk in chunks)
    streamed = "".join(text_of(choice) for chunk in chunks for choice in chunk["choices"])
    plain_choice = plain["choices"][0]
    assert streamed == plain_choice.get("text", plain_choice.get("message", {}).get("content"))
    assert chunks[-1]["usage"] == plain["usage"]


def test_prompt_beyond_the_context_length_is_rejected(formed_group: EngineGroup) -> None:
    status, body = http_post(f"{formed_group.nodes[0].url}/v1/completions", {"prompt": "word " * 250, "max_tokens": 16})
    assert status == 400
    assert "maximum context length of 256 tokens" in json.loads(body)["message"]


def test_workers_serve_only_health(formed_group: EngineGroup) -> None:
    worker = formed_group.nodes[1]
    assert worker.health() == 200
    assert http_get(f"{worker.url}/health_generate")[0] == 200
    assert http_get(f"{worker.url}/v1/models")[0] == 404
