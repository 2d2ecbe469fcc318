"""Pure: spark-llm:nodes[].smClockCapMhz: a node's GPU SM clock cap as declared state (scripts/lib/gpu_clock.sh).

A GB10 under a long load runs hot enough to shut itself down near 105 °C (docs/real-sparks.md, Heat), and
`nvidia-smi -lgc 0,2000` kept one in bounds. `pulumi up` applies the cap (`--lock-gpu-clocks=0,CAP`), a destroy or
the key unset removes it (`--reset-gpu-clocks`), and every program run reads it back: nvidia-smi reports the clock,
not the lock, so the step records what it applied twice: under /run (a tmpfs, cleared by a reboot as the lock is)
and in the login user's spark-llm directory (what `up` applied, kept across a reboot: the step's drift record). The
probe reads both beside the clock now. The node is as declared while the /run record holds the cap and the clock is
not above it; a reboot (no /run record) or a lock lifted by hand (the clock above the cap: `nvidia-smi -rgc`,
another `-lgc`) is drift, which preview and `spark-llm status` say and `pulumi up` repairs. A lock lifted by hand on
an idle GPU shows once it clocks up: an idle GPU's clock is under any cap.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace

from spark_llm.config.nodes import Node
from spark_llm.plan.nodes import remote_dir
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.scripts import bash_lib

# The step's name in what preview says, and the probe's sections (scripts/lib/gpu_clock.sh gc_read).
STEP = "gpu-clock-cap"
APPLIED_SECTION = "gpu_clock_applied"
RECORD_SECTION = "gpu_clock_record"
NOW_SECTION = "gpu_clock_now"
RANGE_SECTION = "gpu_clock_range"
KEY = "smClockCapMhz"
# The cap sparkrun's `setup throttle-gpu-clock` suggests for a GB10 (docs/real-sparks.md): the example a refusal shows.
SUGGESTED_MHZ = 2000


def caps(nodes: Sequence[Node]) -> dict[str, int]:
    """Each capped node's cap in MHz, by name, in the stack file's order."""
    return {node.name: node.sm_clock_cap_mhz for node in nodes if node.sm_clock_cap_mhz is not None}


def refusals(nodes: Sequence[Node], observations: dict[str, NodeObservation]) -> list[str]:
    """Each cap outside its node's GPU range, as the program's probe read the range (`range_refusal`)."""
    found = []
    for index, node in enumerate(nodes):
        seen = observations.get(node.name)
        if node.sm_clock_cap_mhz is not None and seen is not None and seen.reachable:
            if refusal := range_refusal(index, node.name, node.sm_clock_cap_mhz, seen.facts):
                found.append(refusal)
    return found


def applied_path(user: str) -> str:
    """The record of what `up` applied on a node: the stack's spark-llm directory (no model's), kept by a reboot."""
    return f"{remote_dir(user)}/{STEP}"


def probe(user: str) -> str:
    """Read-only: the records the step left, the SM clock now, the GPU's range (scripts/lib/gpu_clock.sh gc_read)."""
    return bash_lib("gpu_clock") + f"gc_read {shlex.quote(applied_path(user))}\n"


def step_script(cap: int, token: str, user: str) -> str:
    """A node's step: lock the SM clock at most `cap` MHz and record `TOKEN CAP` at create; run as the delete
    ($SPARK_LLM_PHASE=delete: `pulumi destroy`, the key unset, or before a new cap) reset the lock and the records."""
    applied = shlex.quote(applied_path(user))
    return (
        bash_lib("gpu_clock")
        + 'if [ "${SPARK_LLM_PHASE:-create}" = delete ]; then\n'
        + f"  gc_remove {applied}\n"
        + "else\n"
        + f"  gc_apply {int(cap)} {shlex.quote(token)} {applied}\n"
        + "fi\n"
    )


def _number(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


def live(observation: NodeObservation) -> str | None:
    """The cap in force as the probe read it: the recorded cap while the clock is not above it, `lifted (...)` when
    it is, None without a record (never applied since the node booted)."""
    token, _, recorded = observation.facts.get(RECORD_SECTION, "").partition(" ")
    if not token:
        return None
    now, cap = _number(observation.facts.get(NOW_SECTION)), _number(recorded)
    if now is not None and cap is not None and now > cap:
        return f"lifted: the SM clock at {now} MHz"
    return recorded


def recorded(observation: NodeObservation) -> NodeObservation:
    """The observation with what `up` applied where spark_llm.plan.drift.step_token reads a step's record: the cap's
    is the stack's (applied_path), not in a group's token directory."""
    record = observation.facts.get(APPLIED_SECTION, "")
    tokens = {name: value for name, value in observation.tokens.items() if name != STEP}
    return replace(observation, tokens={**tokens, STEP: record} if record else tokens)


def range_refusal(index: int, node: str, cap: int, facts: dict[str, str]) -> str | None:
    """Why the cap cannot be applied on this node's GPU (outside the range it reports), None when it can or when
    the node's nvidia-smi gave no range (the step then says what nvidia-smi says)."""
    low, _, high = facts.get(RANGE_SECTION, "").partition(" ")
    top, bottom = _number(high), _number(low) or 0
    if top is None or bottom <= cap <= top:
        return None
    example = min(max(SUGGESTED_MHZ, bottom), top)
    return (
        f"spark-llm:nodes[{index}].{KEY} {cap} is outside the GPU's range on {node} ({bottom}-{top} MHz, as its"
        f" nvidia-smi reports it): set a value in it, e.g. `pulumi config set --path 'nodes[{index}].{KEY}'"
        f" {example}`."
    )


def drift_warning(node: str, why: str) -> str:
    return (
        f"drift: the GPU's SM clock cap on {node} changed since `pulumi up` ({why}): a reboot resets it, as do"
        " `nvidia-smi -rgc` and another `nvidia-smi -lgc`; `pulumi up` applies it again"
    )
