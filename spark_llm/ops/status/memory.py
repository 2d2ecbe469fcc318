"""What `spark-llm status` says of the memory admission: the program's own reading and rule (issue 41, 7).

When `pulumi up` would restart the group (drift) or start it (nothing deployed), status judges each node's memory as
the admission step will before anything stops (spark_llm.plan.memory: the same probe sections, the same verdict),
so a node that cannot hold its engine now is said beside the restart instead of a promise that `up` then breaks.
Status once said `pulumi up` restarts the group while preview called a node refused and `up` failed on it.
"""

from __future__ import annotations

from spark_llm.group.memory import FITS
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.memory import admission_spec, judge_spec
from spark_llm.plan.observation import NodeObservation


def refusals(plan: DeploymentPlan, seen: dict[str, NodeObservation]) -> list[str]:
    """Each node whose engine would not fit now, in the admission's words (nodes not read are left out)."""
    out = []
    for node in plan.nodes:
        observation = seen.get(node.name)
        if observation is None or observation.error is not None:
            continue
        admission = judge_spec(admission_spec(plan, node), observation.facts)
        if admission.verdict != FITS:
            out.append(admission.line())
    return out


def refused_sentence(refused: list[str]) -> str:
    """What follows the restart's sentence when a node refuses it."""
    return f"; but {'; '.join(refused)}: `pulumi up` would fail at the memory admission before anything stops"
