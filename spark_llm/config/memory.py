"""The `memory` section: what is done about a node's memory before its engine starts (spark_llm.plan.memory)."""

from __future__ import annotations

from pydantic import Field

from spark_llm.config.base import ConfigModel


class Memory(ConfigModel):
    """A node's memory before its engine starts: the admission always runs; dropping the page cache is opt-in."""

    drop_caches: bool = Field(
        False,
        description=(
            "Drop each node's page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`, as root or with `sudo -n`) just"
            " before its engine starts; the memory admission then counts that cache as free"
        ),
        json_schema_extra={"example": True},
    )
