"""LaunchScripts: the one launch script and the engine env file, identical on every node; the head's API key file;
with Ray, the group's Ray token on every node.

Each file is a NodeCommand whose script writes it (content inside the script, on stdin: never on a command line)
and whose delete removes it. The content is in the script's digest, so a file is rewritten only when its content
(or mode) changes, as a replace; a new key, user or port is an update that writes nothing. A file removed or
edited on the node is drift (spark_llm.plan.node_files): its step's token changes and `pulumi up` writes it again.

The Ray token is made here, once per stack: 32 random bytes from this machine's kernel, as hex (the form of `ray
get-auth-token --generate`), printed by a `command:local:Command` whose stdout is a secret output. It runs on the
stack's first `up` with Ray and never again (no triggers: nothing replaces it), so the token is kept in state,
encrypted with the stack's secrets, and the same on every `up`; `pulumi destroy` forgets it and the next stack gets
a new one. It is not derived from anything (an API key, the ssh key, the passphrase): no other secret's rotation
moves it, and nothing else leaks it. It never passes through config, a command line or the console.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from components.commands import NodeCommand
from spark_llm.plan import node_files
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import first_run, record_token_script, step_token
from spark_llm.plan.node_files import file_script, remove_file_command, sha256_text
from spark_llm.plan.observation import NodeObservation

# Prints the new Ray token (64 hex digits) and nothing else, or fails: an empty token file would stop Ray.
RAY_TOKEN_COMMAND = "t=$(od -An -vtx1 -N32 /dev/urandom | tr -d ' \\n') && [ ${#t} -eq 64 ] && printf %s \"$t\""


@dataclass(frozen=True, kw_only=True)
class LaunchScriptsArgs:
    plan: DeploymentPlan
    """The deployment plan: nodes, rendered script and env file."""
    connections: dict[str, command.remote.ConnectionArgs]
    """pulumi-command's connection to each node, by node name (components.connection.command_connection)."""
    observations: dict[str, NodeObservation] | None = None
    """What every node has now (spark_llm.remote.observe); None: not looked at (unit tests)."""


class LaunchScripts(pulumi.ComponentResource):
    """Copies launch.sh (0755) and engine.env (0600) to every node; recopies a file only when it changes."""

    script_sha256: pulumi.Output[str]
    api_config_digest: pulumi.Output[str] | None
    ray_token_digest: pulumi.Output[str] | None
    files: dict[str, list[NodeCommand]]

    def __init__(self, name: str, args: LaunchScriptsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:LaunchScripts", name, None, opts)
        plan = args.plan

        def token(node: NodePlan, path: str) -> str:
            observation = (args.observations or {}).get(node.name)
            live = node_files.live_value(observation.facts, path) if observation else None
            value, why = step_token(observation, node_files.drift_step(path), live)
            if live in (node_files.DIRECTORY, node_files.NONEMPTY_DIRECTORY):
                # Named whatever the records say: docker made it when a container started before the file was
                # there (the other state's `destroy` removed file and records alike), and every later container
                # mounts it.
                pulumi.log.warn(node_files.directory_warning(node.name, path, live))
            elif why and not first_run(observation, node_files.drift_step(path)):
                state = "removed" if live is None else "edited"
                pulumi.log.warn(f"drift: {path} on {node.name} was {state} since `pulumi up`; `up` writes it again")
            return value

        def node_file(
            resource: str, node: NodePlan, path: str, content: pulumi.Input[str], mode: str, secret: bool
        ) -> NodeCommand:
            text = pulumi.Output.secret(content) if secret else pulumi.Output.from_input(content)
            step = node_files.drift_step(path)
            drift_token = token(node, path)
            return NodeCommand(
                resource,
                connection=args.connections[node.name],
                script=text.apply(
                    lambda c: file_script(
                        path, c, mode, record_token_script(node.remote_dir, step, drift_token, sha256_text(c))
                    )
                ),
                delete=remove_file_command(path, node.remote_dir),
                triggers=[drift_token],
                # A secret file's script (its content) is encrypted in state, and so is its digest.
                secret=secret,
                # The old file's delete must run before the new one is written, not after (same path).
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )

        self.files = {}
        for node in plan.nodes:
            self.files[node.name] = [
                node_file(f"{name}-{node.name}-script", node, node.script_path, plan.launch_script, "0755", False),
                # The env file may carry secrets: a secret in state, and 0600 on the node.
                node_file(f"{name}-{node.name}-env", node, node.env_path, plan.env_file, "0600", True),
            ]
        self.api_config_digest = None
        if plan.api_config and plan.api_config_path:
            # The API key, for the head's engine only (the rank that serves the API): a secret in state, 0600 on
            # the node, handed to the engine as `--config` so it is on no command line.
            self.files[plan.head.name].append(
                node_file(
                    f"{name}-{plan.head.name}-api-key", plan.head, plan.api_config_path, plan.api_config, "0600", True
                )
            )
            # A new key must restart the group (the engine reads the file at start): its digest, kept secret.
            self.api_config_digest = pulumi.Output.secret(sha256_text(plan.api_config))
        self.ray_token_digest = None
        if plan.ray_auth:
            made = command.local.Command(
                f"{name}-ray-token",
                create=RAY_TOKEN_COMMAND,
                # The token goes to state (encrypted), never to the console.
                logging=command.local.Logging.NONE,
                opts=pulumi.ResourceOptions(parent=self, additional_secret_outputs=["stdout"]),
            )
            printed: pulumi.Input[str] = made.stdout
            ray_token = pulumi.Output.secret(printed)
            for node in plan.nodes:
                # Every Ray node needs it: the head's Ray checks it, the workers' Ray and vLLM's driver send it.
                self.files[node.name].append(
                    node_file(f"{name}-{node.name}-ray-token", node, node.ray_token_path, ray_token, "0600", True)
                )
            # A new token (a new stack on the same nodes) must restart the group: its digest, kept secret.
            self.ray_token_digest = pulumi.Output.secret(ray_token.apply(sha256_text))
        self.script_sha256 = pulumi.Output.from_input(sha256_text(plan.launch_script))
        self.register_outputs({"script_sha256": self.script_sha256})
