"""LaunchScripts: the one launch script and the engine env file, identical on every node; the head's API key file."""

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
    api_config_digest: pulumi.Output[str] | None
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
        self.api_config_digest = None
        if plan.api_config and plan.api_config_path:
            # The API key, for the head's engine only (the rank that serves the API): a secret in state, 0600 on
            # the node, handed to the engine as `--config` so it is on no command line.
            self.files[plan.head.name].append(
                RemoteFile(
                    f"{name}-{plan.head.name}-api-key",
                    connection=plan.head.ssh.to_props(),
                    path=plan.api_config_path,
                    content=pulumi.Output.secret(plan.api_config),
                    mode="0600",
                    label=plan.head.name,
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
            # A new key must restart the group (the engine reads the file at start): its digest, kept secret.
            self.api_config_digest = pulumi.Output.secret(sha256_text(plan.api_config))
        self.script_sha256 = pulumi.Output.from_input(sha256_text(plan.launch_script))
        self.register_outputs({"script_sha256": self.script_sha256})
