"""SparkCluster: wires LaunchScripts, EngineImage, ModelWeights and EngineGroup from one plan."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.engine_group import EngineGroup, EngineGroupArgs
from components.engine_image import EngineImage, EngineImageArgs
from components.launch_scripts import LaunchScripts, LaunchScriptsArgs
from components.model_weights import ModelWeights, ModelWeightsArgs
from spark_llm.plan import DeploymentPlan


@dataclass(frozen=True, kw_only=True)
class SparkClusterArgs:
    plan: DeploymentPlan
    """The deployment plan built from the stack config."""


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
        scripts = LaunchScripts(f"{name}-scripts", LaunchScriptsArgs(plan=plan), pulumi.ResourceOptions(parent=self))
        image = EngineImage(f"{name}-image", EngineImageArgs(plan=plan), pulumi.ResourceOptions(parent=self))
        weights = ModelWeights(f"{name}-weights", ModelWeightsArgs(plan=plan), pulumi.ResourceOptions(parent=self))
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
