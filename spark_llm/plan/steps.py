"""Pure: every node step the components declare, resolved from the plan once (no Pulumi, no I/O but `scripts/`).

The components loop over this and declare resources: they read no config and render no script of their own.
What a step cannot know before this program run's observation of the nodes (its drift token) or before `up` (a
container's ID, the state's id, the Ray token) is the one argument of the plan function that finishes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_llm.plan import container, firewall, node_files, supervisor, supervisor_key
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.image import steps as image
from spark_llm.plan.image.steps import ImagePlan
from spark_llm.plan.node_files import NodeFile
from spark_llm.plan.weights import steps as weights
from spark_llm.plan.weights.steps import WeightsPlan


@dataclass(frozen=True)
class DeploymentSteps:
    """The steps of one deployment, by node name where a step is per node."""

    image: ImagePlan
    """The engine image on every node (components.engine_image)."""
    weights: WeightsPlan
    """The weights at model.path on every node (components.model_weights)."""
    files: dict[str, tuple[NodeFile, ...]]
    """The launch files each node gets (components.launch_scripts)."""
    probes: dict[str, str]
    """The extra probe sections each node's observation runs (spark_llm.remote.observe): the launch files' and the
    weights' live digests, on the head the supervisor's state, on a worker the supervisor's key line."""
    stops: dict[str, str]
    """The step that stops each node's engine before the group is replaced (components.engine_group)."""
    firewall: dict[str, str]
    """Each node's nftables table (components.firewall); empty while spark-llm:network.firewall is off."""


def build_steps(plan: DeploymentPlan) -> DeploymentSteps:
    weights_steps = weights.weights_plan(plan)
    files = {n.name: node_files.launch_files(plan, n) for n in plan.nodes}
    return DeploymentSteps(
        image=image.image_plan(plan),
        weights=weights_steps,
        files=files,
        probes={
            n.name: node_files.probe([f.path for f in files[n.name]])
            + weights_steps.probes[n.name]
            + supervisor.probe(plan, n)
            + supervisor_key.probe(plan, n)
            + firewall.probe(plan)
            for n in plan.nodes
        },
        stops={n.name: container.stop_script(plan, n) for n in plan.nodes},
        firewall=firewall.steps(plan),
    )
