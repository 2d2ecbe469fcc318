"""The `model` section: which weights, where they come from, where they live on every node."""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from spark_llm.config.base import (
    ConfigModel,
    KeyedError,
)
from spark_llm.config.paths import AbsPath, abs_path

_REVISION = re.compile(r"^[0-9a-f]{40}$")
_HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
# What a served model's name may hold: every client must send it exactly, so nothing invisible or look-alike (a
# zero-width space, an em dash for a hyphen). Hugging Face ids, `org/name:tag` and `name@rev` fit.
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$")


def model_name(value: str) -> str:
    """A served model's name: printable ASCII, no spaces; the error names the first character that is not."""
    if _MODEL_NAME.match(value):
        return value
    bad = next((i, c) for i, c in enumerate(value) if not _MODEL_NAME.match(("a" if i else "") + c))
    index, char = bad
    what = unicodedata.name(char, f"U+{ord(char):04X}")
    raise ValueError(
        f"holds {what} (U+{ord(char):04X}) at position {index + 1}: clients must send the name exactly, so it takes"
        " ASCII letters, digits and . _ : / @ + - only"
    )


class ModelSource(ConfigModel):
    """Where the weights come from: a pinned Hugging Face revision, a directory on the head, or one here."""

    kind: Literal["huggingface", "head", "local"] = Field(
        description="huggingface (download on the head), head (a directory there), local (upload from here)",
        json_schema_extra={"example": "huggingface"},
    )
    repo: str | None = Field(
        None,
        description="Hugging Face repo (kind huggingface)",
        json_schema_extra={"example": "Qwen/Qwen3.5-122B-A10B-FP8"},
    )
    revision: str | None = Field(
        None,
        description="Pinned commit of the repo, 40 hex digits (kind huggingface)",
        json_schema_extra={"example": "0123456789abcdef0123456789abcdef01234567"},
    )
    path: str | None = Field(
        None,
        description="Directory on the head (kind head) or on this machine (kind local)",
        json_schema_extra={"example": "/home/aurora/models/Qwen3.5-122B-A10B-FP8"},
    )

    @model_validator(mode="after")
    def _fields_for_kind(self) -> ModelSource:
        if self.kind == "huggingface":
            if not self.repo or not _HF_REPO.match(self.repo):
                raise KeyedError("kind huggingface needs repo: OWNER/NAME as on huggingface.co", ("repo",))
            if not self.revision or not _REVISION.match(self.revision):
                why = "kind huggingface needs revision: the full 40-hex commit to pin (a branch name moves under you)"
                raise KeyedError(why, ("revision",))
            if self.path is not None:
                raise KeyedError("kind huggingface takes no path (the weights go to model.path): remove it", ("path",))
            return self
        for extra in ("repo", "revision"):
            if getattr(self, extra) is not None:
                raise KeyedError(f"kind {self.kind} takes no {extra} (kind huggingface does): remove it", (extra,))
        if not self.path:
            raise KeyedError(f"kind {self.kind} needs path: the weights directory", ("path",))
        if self.kind == "head":
            try:
                abs_path(self.path)
            except ValueError as err:
                raise KeyedError(f"{err} on the head", ("path",)) from None
        elif not Path(os.path.expanduser(self.path)).is_dir():
            why = f"local weights directory {self.path} does not exist on this machine (relative to the project)"
            raise KeyedError(why, ("path",))
        return self


class Model(ConfigModel):
    """The model served: its name in the API, its weights' source, and their directory on every node."""

    name: Annotated[str, AfterValidator(model_name)] = Field(
        min_length=1,
        description="Model name served by the API",
        json_schema_extra={"example": "Qwen/Qwen3.5-122B-A10B-FP8"},
    )
    path: AbsPath = Field(
        description="Weights directory, the same path on every node",
        json_schema_extra={"example": "/home/aurora/models/Qwen3.5-122B-A10B-FP8"},
    )
    source: ModelSource | None = Field(
        None,
        description="Where the weights come from (default: already at path on the head)",
        json_schema_extra={"example": {"kind": "huggingface", "repo": "Qwen/Qwen3.5-122B-A10B-FP8", "revision": "..."}},
    )
    purge_on_destroy: bool = Field(
        False,
        description="Delete the weights from every node on `pulumi destroy` (default: keep them)",
        json_schema_extra={"example": False},
    )

    @property
    def effective_source(self) -> ModelSource:
        return self.source or ModelSource(kind="head", path=self.path)
