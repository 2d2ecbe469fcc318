"""LaunchScripts: the one launch script and the engine env file, identical on every node."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from spark_llm.plan import DeploymentPlan
from spark_llm.remote import RemoteFile, sha256_text


@dataclass(frozen=True, kw_only=True)
class LaunchScriptsArgs:
    plan: DeploymentPlan
    """The deployment plan: nodes, rendered script and env file."""


class LaunchScripts(pulumi.ComponentResource):
    """Copies launch.sh (0755) and engine.env (0600) to every node; recopies a file only when it changes."""

    script_sha256: pulumi.Output[str]
    files: dict[str, list[RemoteFile]]

    def __init__(self, name: str, args: LaunchScriptsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:LaunchScripts", name, None, opts)
        plan = args.plan
        self.files = {}
        for node in plan.nodes:
            script = RemoteFile(
                f"{name}-{node.name}-script",
                connection=node.ssh.to_props(),
                path=node.script_path,
                content=plan.launch_script,
                mode="0755",
                label=node.name,
                opts=pulumi.ResourceOptions(parent=self),
            )
            # The env file may carry secrets: its content is a secret in state, and it is 0600 on the node.
            env = RemoteFile(
                f"{name}-{node.name}-env",
                connection=node.ssh.to_props(),
                path=node.env_path,
                content=pulumi.Output.secret(plan.env_file),
                mode="0600",
                label=node.name,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.files[node.name] = [script, env]
        self.script_sha256 = pulumi.Output.from_input(sha256_text(plan.launch_script))
        self.register_outputs({"script_sha256": self.script_sha256})
