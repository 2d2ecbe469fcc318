"""The `image` section: which engine image every node runs, and how it gets there."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from spark_llm.config.base import (
    ConfigModel,
    KeyedError,
)
from spark_llm.config.paths import ImageRef


class Image(ConfigModel):
    """The engine's container image and how it reaches every node."""

    ref: ImageRef = Field(
        description="Image reference as `docker run` takes it",
        json_schema_extra={"example": "lmsysorg/sglang:spark"},
    )
    # present: already on every node (checked); pull: `docker pull` on each node; transfer: from `source` to every
    # node that lacks it, over the fabric from the head (`docker save | docker load`: the whole image
    # to a worker that holds none of its layers, else only the layers it lacks; spark_llm.plan.image.layers).
    mode: Literal["present", "pull", "transfer"] = Field(
        "present",
        description="present (checked), pull on each node, or transfer to the nodes that lack it",
        json_schema_extra={"example": "transfer"},
    )
    source: Literal["head", "operator"] = Field(
        "head",
        description="With mode transfer: where the image is (the head, or this machine's docker)",
        json_schema_extra={"example": "head"},
    )
    platform: Literal["linux/arm64", "linux/amd64"] = Field(
        "linux/arm64", description="Platform every node must run", json_schema_extra={"example": "linux/arm64"}
    )

    @model_validator(mode="after")
    def _source_only_when_transferred(self) -> Image:
        # Only mode transfer reads `source`: `source: operator` with another mode would move nothing from here.
        if self.source == "operator" and self.mode != "transfer":
            why = f"source operator is read by mode transfer only (mode is {self.mode}): set mode: transfer"
            raise KeyedError(why, ("mode",), "transfer")
        return self
