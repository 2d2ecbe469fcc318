"""Engine profiles: what each engine runs on each node, in which order, with which environment.

Pure planning (no Pulumi, no I/O). A profile turns the stack config and the node ranks into, per node, the
container's command and environment, plus the docker options and the readiness check shared by the group:
sglang, vllm (native and Ray), on common's types. Look a profile up with `profile_for(engine)`; an unknown one
lists the known ones.
"""

from __future__ import annotations

from spark_llm.plan.engines.common import EngineProfile, NodeLaunch, Topology
from spark_llm.plan.engines.sglang import SGLANG
from spark_llm.plan.engines.vllm import VLLM_NATIVE, VLLM_RAY

# (engine.kind, engine.executor) -> profile.
PROFILES: dict[tuple[str, str], EngineProfile] = {
    ("sglang", "native"): SGLANG,
    ("vllm", "native"): VLLM_NATIVE,
    ("vllm", "ray"): VLLM_RAY,
}


def profile_for(kind: str, executor: str) -> EngineProfile:
    try:
        return PROFILES[(kind, executor)]
    except KeyError:
        known = ", ".join(f"{k}/{e}" for k, e in PROFILES)
        raise ValueError(f"no engine profile for kind {kind!r} with executor {executor!r}; known: {known}") from None


__all__ = ["PROFILES", "EngineProfile", "NodeLaunch", "Topology", "profile_for"]
