"""What `spark-llm status` says of the weights: the program's own reading (issue 31, 2).

The same probe the program runs at every preview and `up` (spark_llm.plan.observation, with each node's weights probe
from spark_llm.plan.weights.steps) and the same rule (spark_llm.plan.drift.step_token): a node whose weights are not
the ones its last copy verified (a file changed, a copy cut short, which drops the record first) is drift, and
`pulumi up` copies and verifies them again before the group restarts. Status once said "in sync" there while
preview showed the weights' drift.
"""

from __future__ import annotations

from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.drift import step_token
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.weights.steps import DRIFT_STEP, weights_plan


def weights_drift(plan: DeploymentPlan, seen: dict[str, NodeObservation]) -> list[str]:
    """Each node whose weights differ from what the last `up` verified there, and how (unreachable nodes are left
    out: status says so of them already). `seen`: the program's probe of each node with its weights' probe, as the
    status script read it (spark_llm.ops.status.read)."""
    steps = weights_plan(plan)
    found = []
    for node in plan.nodes:
        observation = seen[node.name]
        if observation.error is not None:
            continue
        _, why = step_token(observation, DRIFT_STEP, steps.live(node, observation.facts))
        if why is not None:
            found.append(why)
    return found
