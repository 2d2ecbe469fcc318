"""Pure: memory admission. Will a rank's engine fit on its node now, judged before anything stops?

The verdict is spark_llm.group.memory's (standard library only: the supervisor uses it too): what a rank needs
(its weights share, the engine's memory setting) against what its node gives now (meminfo, GPU processes). Its
callers import it from there. Here:
- probe: the read-only bash that reads a node;
- steps: the admission step's spec, its token (new at every run while `up` stops the group) and the record it
  leaves, and the opt-in page cache drop before each engine starts.
"""

from spark_llm.plan.memory.probe import PROBE_FUNCTION, probe_command
from spark_llm.plan.memory.steps import (
    ADMISSION_STEP,
    DROP_CACHES_SCRIPT,
    AdmissionSpec,
    admission_spec,
    admission_token,
    judge_spec,
    parse_spec,
    record_script,
    spec_text,
)

__all__ = [
    "ADMISSION_STEP",
    "DROP_CACHES_SCRIPT",
    "PROBE_FUNCTION",
    "AdmissionSpec",
    "admission_spec",
    "admission_token",
    "judge_spec",
    "parse_spec",
    "probe_command",
    "record_script",
    "spec_text",
]
