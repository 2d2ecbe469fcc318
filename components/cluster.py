"""SparkCluster: wires LaunchScripts, EngineImage, ModelWeights and EngineGroup from one plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi

from components.engine_group import EngineGroup, EngineGroupArgs
from components.engine_image import EngineImage, EngineImageArgs
from components.launch_scripts import LaunchScripts, LaunchScriptsArgs
from components.model_weights import ModelWeights, ModelWeightsArgs
from spark_llm import weights as weights_plan
from spark_llm.connection import command_connection, docker_provider, read_keys
from spark_llm.observe import NodeObservation
from spark_llm.plan import DeploymentPlan, NodePlan


def probe_extra(plan: DeploymentPlan) -> Callable[[NodePlan], str]:
    """The `extra` probe sections of spark_llm.observe.observe for this plan (the weights' live digests)."""
    tool = weights_plan.MANIFEST_TOOL_PATH.read_text()
    return lambda node: weights_plan.render_probe(plan.config, node, tool)


@dataclass(frozen=True, kw_only=True)
class SparkClusterArgs:
    plan: DeploymentPlan
    """The deployment plan built from the stack config."""
    observations: dict[str, NodeObservation] | None = None
    """What every node had at this program run (spark_llm.observe with `probe_extra`); None: not observed."""
    keys: dict[str, str] | None = None
    """The ssh private keys by path (spark_llm.connection.read_keys); None: read here."""


class SparkCluster(pulumi.ComponentResource):
    """One model served by one engine group across the stack's nodes."""

    endpoint: pulumi.Output[str]
    group_revision: pulumi.Output[str]
    script_sha256: pulumi.Output[str]
    container_ids: pulumi.Output[dict]
    image_id: pulumi.Output[str]
    weights_manifest_digest: pulumi.Output[str]

    def __init__(self, name: str, args: SparkClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:SparkCluster", name, None, opts)
        plan = args.plan
        # An unreadable key stops the program before any resource is declared (read before observing, ideally).
        keys = args.keys if args.keys is not None else read_keys(plan.config)
        connections = {node.name: command_connection(node.ssh, keys) for node in plan.nodes}
        providers = {
            node.name: docker_provider(f"{name}-docker-{node.name}", node.ssh, pulumi.ResourceOptions(parent=self))
            for node in plan.nodes
        }
        observed = args.observations
        scripts = LaunchScripts(
            f"{name}-scripts",
            LaunchScriptsArgs(plan=plan, connections=connections),
            pulumi.ResourceOptions(parent=self),
        )
        image = EngineImage(
            f"{name}-image",
            EngineImageArgs(plan=plan, connections=connections, providers=providers, observations=observed),
            pulumi.ResourceOptions(parent=self),
        )
        weights = ModelWeights(
            f"{name}-weights",
            ModelWeightsArgs(plan=plan, connections=connections, observations=observed),
            pulumi.ResourceOptions(parent=self),
        )
        group = EngineGroup(
            f"{name}-engine",
            # Prerequisites of every container, and what restarts the group when it changes.
            EngineGroupArgs(
                plan=plan,
                after=[scripts, image, weights],
                restart_on=[
                    scripts.script_sha256,
                    image.image_id,
                    weights.manifest_digest,
                    *([scripts.api_config_digest] if scripts.api_config_digest is not None else []),
                ],
            ),
            pulumi.ResourceOptions(parent=self),
        )
        self.endpoint = group.ready.id.apply(lambda _: plan.endpoint)
        self.group_revision = pulumi.Output.from_input(plan.group_revision)
        self.script_sha256 = scripts.script_sha256
        self.container_ids = group.container_ids
        self.image_id = image.image_id
        self.weights_manifest_digest = weights.manifest_digest
        self.register_outputs(
            {
                "endpoint": self.endpoint,
                "group_revision": self.group_revision,
                "script_sha256": self.script_sha256,
                "container_ids": self.container_ids,
                "image_id": self.image_id,
                "weights_manifest_digest": self.weights_manifest_digest,
            }
        )
