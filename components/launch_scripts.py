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
from functools import partial

import pulumi
import pulumi_command as command

from components.commands import NodeCommand, secret_digest
from components.drift_notes import noted_step_token
from spark_llm.plan import node_files
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.node_files import NodeFile, sha256_text
from spark_llm.plan.observation import NodeObservation

# Prints the new Ray token (64 hex digits) and nothing else, or fails: an empty token file would stop Ray.
RAY_TOKEN_COMMAND = "t=$(od -An -vtx1 -N32 /dev/urandom | tr -d ' \\n') && [ ${#t} -eq 64 ] && printf %s \"$t\""


@dataclass(frozen=True, kw_only=True)
class LaunchScriptsArgs:
    plan: DeploymentPlan
    """The deployment plan: nodes, and whether there is an API key and a Ray token."""
    files: dict[str, tuple[NodeFile, ...]]
    """The files each node gets, by node name (spark_llm.plan.steps.build_steps)."""
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
            directory = live in (node_files.DIRECTORY, node_files.NONEMPTY_DIRECTORY)
            if live is not None and directory:
                # Named whatever the records say: docker made it when a container started before the file was
                # there (the other state's `destroy` removed file and records alike), and every later container
                # mounts it.
                pulumi.log.warn(node_files.directory_warning(node.name, path, live))
            state = "removed" if live is None else "edited"
            return noted_step_token(
                observation,
                node_files.drift_step(path),
                live,
                on_drift=None
                if directory
                else lambda _: f"drift: {path} on {node.name} was {state} since `pulumi up`; `up` writes it again",
            )

        ray_token: pulumi.Output[str] | None = None
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
            # A new token (a new stack on the same nodes) must restart the group: its digest, kept secret.
            self.ray_token_digest = secret_digest(ray_token)
        self.api_config_digest = None
        if plan.api_config:
            # A new key must restart the group (the engine reads the file at start): its digest, kept secret.
            self.api_config_digest = pulumi.Output.secret(sha256_text(plan.api_config))

        self.files = {}
        for node in plan.nodes:
            self.files[node.name] = []
            for file in args.files[node.name]:
                content = file.content if file.content is not None else ray_token
                assert content is not None  # a file without content is the Ray token, made above (plan.ray_auth)
                text = pulumi.Output.secret(content) if file.secret else pulumi.Output.from_input(content)
                drift_token = token(node, file.path)
                self.files[node.name].append(
                    NodeCommand(
                        f"{name}-{node.name}-{file.name}",
                        connection=args.connections[node.name],
                        script=text.apply(partial(node_files.file_step, node, file, token=drift_token)),
                        delete=file.delete,
                        triggers=[drift_token],
                        # A secret file's script (its content) is encrypted in state, and so is its digest.
                        secret=file.secret,
                        # The old file's delete must run before the new one is written, not after (same path).
                        opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
                    )
                )
        self.script_sha256 = pulumi.Output.from_input(sha256_text(plan.launch_script))
        self.register_outputs({"script_sha256": self.script_sha256})
