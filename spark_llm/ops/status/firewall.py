"""What `spark-llm status` says of the firewall (spark-llm:network.firewall fabric-only): the program's own reading.

The same probe the program runs at every preview and `up` (spark_llm.plan.firewall.probe: the table's digest) and
the same rule (spark_llm.plan.drift.step_token): a node whose table is gone or changed since `pulumi up` installed
it (a reboot, `nft flush ruleset`) is drift, in preview's words, and `pulumi up` installs it again. Status once said
"in sync" there while preview showed the firewall's drift (issue 41, 7).
"""

from __future__ import annotations

from spark_llm.plan import firewall
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.drift import step_token
from spark_llm.plan.observation import NodeObservation


def firewall_drift(plan: DeploymentPlan, seen: dict[str, NodeObservation]) -> list[str]:
    """Each node whose table differs from what the last `up` installed there, as preview says it (nodes that could
    not be read are left out: status says so of them already); [] while the firewall is off."""
    if not firewall.enabled(plan):
        return []
    found = []
    for node in plan.nodes:
        observation = seen.get(node.name)
        if observation is None or observation.error is not None:
            continue
        _, why = step_token(observation, firewall.STEP, firewall.live(observation))
        if why is not None:
            found.append(firewall.drift_warning(node, why))
    return found
