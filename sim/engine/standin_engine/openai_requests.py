"""The OpenAI request bodies as the stand-in reads them (prompts, limits, stop strings, context checks) and the
streamed chunks it answers with; standin_engine.openai_api serves them over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from http import HTTPStatus

from standin_engine.generation import Generation
from standin_engine.launch_config import LaunchConfig

MAX_CHOICES = 16


class ApiError(Exception):
    """A request the API answers with an OpenAI-style error object."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def prompts_of(prompt: object) -> list[str]:
    """The OpenAI `prompt` field as a list of texts: a string, strings, token ids, or lists of token ids."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(item, str) for item in prompt):
            return list(prompt)
        if all(isinstance(item, int) for item in prompt):
            return [" ".join(map(str, prompt))]
        if all(isinstance(item, list) and all(isinstance(t, int) for t in item) for item in prompt):
            return [" ".join(map(str, item)) for item in prompt]
    raise ApiError(HTTPStatus.BAD_REQUEST, "prompt must be a string, a list of strings or a list of token ids")


def chat_prompt(messages: object) -> str:
    """The chat messages rendered in a plain template, the text the stand-in seeds and counts tokens from."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(HTTPStatus.BAD_REQUEST, "messages must be a non-empty list")
    lines = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(HTTPStatus.BAD_REQUEST, "every message needs a string role")
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            raise ApiError(HTTPStatus.BAD_REQUEST, "message content must be a string or a list of parts")
        lines.append(f"<|{message['role']}|>\n{content}")
    return "\n".join(lines) + "\n<|assistant|>\n"


def max_tokens_of(value: object, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"max_tokens must be a non-negative integer, got {value!r}")
    return value


def choice_count(value: object) -> int:
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHOICES:
        raise ApiError(HTTPStatus.BAD_REQUEST, f"n must be an integer in 1..{MAX_CHOICES}, got {value!r}")
    return value


def stop_strings(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise ApiError(HTTPStatus.BAD_REQUEST, "stop must be a string or a list of strings")


def check_context(config: LaunchConfig, prompt_tokens: int, max_tokens: int) -> None:
    total = prompt_tokens + max_tokens
    if total > config.context_length:
        raise ApiError(
            HTTPStatus.BAD_REQUEST,
            f"Requested token count exceeds the model's maximum context length of {config.context_length} tokens. "
            f"You requested a total of {total} tokens: {prompt_tokens} tokens from the input messages and "
            f"{max_tokens} tokens for the completion. Please reduce the number of tokens in the input messages or "
            "the completion to fit within the limit.",
        )


def include_usage(body: dict) -> bool:
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


def usage_block(prompt_tokens: int, generations: list[Generation]) -> dict:
    completion_tokens = sum(generation.completion_tokens for generation in generations)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_chunks(envelope: dict, generations: list[Generation], usage: dict | None) -> Iterator[dict]:
    base = {**envelope, "object": "text_completion"}
    for index, generation in enumerate(generations):
        for piece in generation.pieces:
            yield {**base, "choices": [{"index": index, "text": piece, "logprobs": None, "finish_reason": None}]}
        yield {
            **base,
            "choices": [{"index": index, "text": "", "logprobs": None, "finish_reason": generation.finish_reason}],
        }
    if usage is not None:
        yield {**base, "choices": [], "usage": usage}


def chat_chunks(envelope: dict, generations: list[Generation], usage: dict | None) -> Iterator[dict]:
    base = {**envelope, "object": "chat.completion.chunk"}
    for index, generation in enumerate(generations):
        yield {
            **base,
            "choices": [
                {"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            ],
        }
        for piece in generation.pieces:
            yield {
                **base,
                "choices": [{"index": index, "delta": {"content": piece}, "logprobs": None, "finish_reason": None}],
            }
        yield {
            **base,
            "choices": [{"index": index, "delta": {}, "logprobs": None, "finish_reason": generation.finish_reason}],
        }
    if usage is not None:
        yield {**base, "choices": [], "usage": usage}
