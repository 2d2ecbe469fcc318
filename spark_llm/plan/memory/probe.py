"""Pure: the memory admission's reading of a node (scripts/lib/memory.sh): the program's probe
(spark_llm.remote.observe), the admission step (spark_llm.ops.admission) and `spark-llm preflight` run it; its
sections are read by spark_llm.group.memory.parse."""

from __future__ import annotations

import shlex

from spark_llm.plan.scripts import bash_lib

PROBE_FUNCTION = bash_lib("memory")


def probe_command(model_path: str) -> str:
    """Read-only bash printing the memory sections of a node (the function, then one call)."""
    return PROBE_FUNCTION + f"memory_probe {shlex.quote(model_path)}\n"
