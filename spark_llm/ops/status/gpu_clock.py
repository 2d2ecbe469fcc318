"""What `spark-llm status` says of the GPU clock caps (spark-llm:nodes[].smClockCapMhz): the program's own reading.

The same probe the program runs at every preview and `up` (spark_llm.plan.gpu_clock.probe: what `up` applied, what
is in force since the node booted, the SM clock now) and the same rule (spark_llm.plan.drift.step_token): a capped
node of the group whose cap is gone (a reboot) or lifted by hand (its clock above the cap) is drift, in preview's
words, and `pulumi up` applies it again.
"""

from __future__ import annotations

from spark_llm.plan import gpu_clock
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.drift import first_run, step_token
from spark_llm.plan.observation import NodeObservation


def probe(plan: DeploymentPlan, node: str, user: str) -> str:
    """The cap's probe sections on a capped node of the group; nothing on another."""
    return gpu_clock.probe(user) if node in gpu_clock.caps(plan.config.stack.nodes) else ""


def clock_drift(plan: DeploymentPlan, seen: dict[str, NodeObservation]) -> list[str]:
    """Each capped node of the group whose cap differs from what the last `up` applied there, as preview says it
    (nodes that could not be read are left out: status says so of them already; a cap never applied is a change
    `up` makes, not drift)."""
    caps = gpu_clock.caps(plan.config.stack.nodes)
    found = []
    for node in plan.nodes:
        observation = seen.get(node.name)
        if node.name not in caps or observation is None or observation.error is not None:
            continue
        applied = gpu_clock.recorded(observation)
        if first_run(applied, gpu_clock.STEP):
            continue
        _, why = step_token(applied, gpu_clock.STEP, gpu_clock.live(observation))
        if why is not None:
            found.append(gpu_clock.drift_warning(node.name, why))
    return found
