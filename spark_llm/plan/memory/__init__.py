"""Pure: memory admission. Will a rank's engine fit on its node now, judged before anything stops?

- the verdict (spark_llm.group.memory, standard library only: the supervisor uses it too): what a rank needs (its
  weights share, the engine's memory setting) against what its node gives now (meminfo, GPU processes);
- probe: the read-only bash that reads a node;
- steps: the admission step's spec, and the opt-in page cache drop before each engine starts.
"""

from spark_llm.group.memory import (
    ENGINE_RESERVE,
    FITS,
    GIB,
    GPU_SECTION,
    INFO_SECTION,
    REFUSED,
    UNREAD,
    WARN,
    WARN_MARGIN,
    WEIGHTS_SECTION,
    Admission,
    EngineMemory,
    GpuProcess,
    NodeMemory,
    engine_memory,
    judge,
    parse,
    rank_weights,
)
from spark_llm.plan.memory.probe import PROBE_FUNCTION, probe_command
from spark_llm.plan.memory.steps import (
    DROP_CACHES_SCRIPT,
    AdmissionSpec,
    admission_spec,
    judge_spec,
    parse_spec,
    spec_text,
)

__all__ = [
    "DROP_CACHES_SCRIPT",
    "ENGINE_RESERVE",
    "FITS",
    "GIB",
    "GPU_SECTION",
    "INFO_SECTION",
    "PROBE_FUNCTION",
    "REFUSED",
    "UNREAD",
    "WARN",
    "WARN_MARGIN",
    "WEIGHTS_SECTION",
    "Admission",
    "AdmissionSpec",
    "EngineMemory",
    "GpuProcess",
    "NodeMemory",
    "admission_spec",
    "engine_memory",
    "judge",
    "judge_spec",
    "parse",
    "parse_spec",
    "probe_command",
    "rank_weights",
    "spec_text",
]
