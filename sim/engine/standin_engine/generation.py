"""Deterministic stand-in text: a short continuation from a fixed vocabulary, seeded by a hash of the prompt."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

# Plain words that read as simulated output, never as a model's answer.
VOCABULARY: tuple[str, ...] = (
    "stand-in",
    "engine",
    "simulated",
    "token",
    "spark",
    "node",
    "fabric",
    "rank",
    "head",
    "worker",
    "group",
    "tensor",
    "parallel",
    "rendezvous",
    "heartbeat",
    "cluster",
    "launch",
    "serve",
    "prompt",
    "reply",
    "deterministic",
    "sample",
    "text",
    "no",
    "model",
    "here",
    "only",
    "a",
    "the",
    "of",
    "and",
    "from",
    "over",
    "link",
    "ready",
    "health",
    "check",
    "batch",
    "cache",
    "layer",
    "weight",
    "shard",
)
MIN_NATURAL_TOKENS = 8
NATURAL_TOKEN_SPREAD = 24
_TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True)
class Generation:
    """One generated choice: the text pieces (one per stand-in token) and why generation stopped."""

    pieces: tuple[str, ...]
    finish_reason: str

    @property
    def text(self) -> str:
        return "".join(self.pieces)

    @property
    def completion_tokens(self) -> int:
        return len(self.pieces)


def count_tokens(text: str) -> int:
    """Stand-in token count: words and punctuation marks, at least 1 for non-empty text."""
    return len(_TOKEN_PATTERN.findall(text)) or (1 if text else 0)


def generate(
    *,
    model: str,
    prompt: str,
    max_tokens: int,
    stop: Sequence[str] = (),
    choice_index: int = 0,
    leading_space: bool,
    salt: str = "",
) -> Generation:
    """The same model, prompt, choice index and salt always give the same text; at most max_tokens pieces.

    `salt` (the answer-salt knob, knobs.answer_salt) changes every answer, as a changed model or kernel would.
    """
    salted = f"{salt}\0" if salt else ""
    seed = hashlib.sha256(f"{salted}{model}\0{choice_index}\0{prompt}".encode()).digest()
    natural_length = MIN_NATURAL_TOKENS + seed[0] % NATURAL_TOKEN_SPREAD
    length = min(natural_length, max_tokens)
    pieces: list[str] = []
    for position in range(length):
        word = VOCABULARY[
            int.from_bytes(hashlib.sha256(seed + position.to_bytes(4, "big")).digest()[:4], "big") % len(VOCABULARY)
        ]
        if position == 0 and not leading_space:
            piece = word.capitalize()
        else:
            piece = " " + word
        if position == natural_length - 1:
            piece += "."
        pieces.append(piece)
    finish_reason = "stop" if natural_length <= max_tokens else "length"
    return _apply_stop(pieces, finish_reason, stop)


def _apply_stop(pieces: list[str], finish_reason: str, stop: Sequence[str]) -> Generation:
    """Cut the text before the first stop string, as the OpenAI API does; the stop string itself is dropped."""
    text = "".join(pieces)
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    if cut < 0:
        return Generation(tuple(pieces), finish_reason)
    kept: list[str] = []
    position = 0
    for piece in pieces:
        if position + len(piece) > cut:
            if cut > position:
                kept.append(piece[: cut - position])
            break
        kept.append(piece)
        position += len(piece)
    return Generation(tuple(kept), "stop")
