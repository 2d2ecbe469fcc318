"""ModelWeights: the model's weights at `model.path` on every node, obtained once and copied over the fabric.

- `{name}-{head}`: on the head, download (kind huggingface) or copy from the head's source dir (kind head), a
  NodeCommand; for kind local an OperatorCommand uploads the operator's directory to the head with rsync over
  plain pinned OpenSSH instead, its manifest digest (computed here at program run, cached) in the triggers, so a
  changed file shows in `pulumi preview`.
- `{name}-workers`: a NodeCommand on the head that copies the head's model.path to every worker over the fabric
  (scripts/fanout.py: parallel streams, workers relaying to workers); replaced (so re-synced) whenever the head's
  copy is, its triggers holding the head resource's ID, or any worker drifted.
- `{name}-{node}-retention`: owns the fate of each copy on destroy. The copies themselves have no delete, so a
  replace (a changed file, drift) never deletes weights; only this resource's delete does, and only with
  model.purgeOnDestroy (spark_llm.plan.weights.retention.render_retention).
Drift: each copy carries its node's drift token (spark_llm.plan.drift) from this program run's observation, whose
probe section (weights.render_probe) is the live manifest digest of model.path: a file changed or deleted on a
node since the last `up` makes preview warn, naming the node, and `up` syncs the files that differ.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pulumi
import pulumi_command as command

from components import bootstrap as stack
from components.commands import NodeCommand, OperatorCommand
from components.connection import ssh_command, ssh_destination
from components.drift_notes import noted_step_token
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.scripts import MANIFEST_TOOL
from spark_llm.plan.weights import steps as weights
from spark_llm.plan.weights import sync as weights_sync
from spark_llm.plan.weights.retention import RETENTION_DELETE_PHASE


@dataclass(frozen=True, kw_only=True)
class ModelWeightsArgs:
    plan: DeploymentPlan
    """The deployment plan: the nodes in rank order."""
    steps: weights.WeightsPlan
    """The weights steps, resolved from the config by the plan (spark_llm.plan.steps.build_steps)."""
    connections: dict[str, command.remote.ConnectionArgs]
    """pulumi-command's connection to each node, by node name (components.connection.command_connection)."""
    observations: dict[str, NodeObservation] | None = None
    """What each node had at this program run (spark_llm.remote.observe); None: not observed (unit tests)."""


def local_manifest(directory: str) -> tuple[str, int | None]:
    """The manifest digest and bytes of a directory on this machine (scripts/manifest.py; unchanged files are not
    re-hashed).

    Runs at every preview and up; the first hash of a large directory shows its progress lines as they come.
    """
    argv = [sys.executable, str(MANIFEST_TOOL), "scan", directory, "--node", "local"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None and proc.stdout is not None
    messages = []
    for line in proc.stderr:
        messages.append(line.rstrip())
        if " hashing " in line:
            pulumi.log.info(line.rstrip())
    stdout = proc.stdout.read()
    if proc.wait() != 0:
        stack.refuse(
            f"could not read the local weights in {directory}:\n"
            + "\n".join(messages[-5:])
            + "\nNothing was run on any node. Fix the files (or spark-llm:model.source.path), then run"
            " `pulumi up` again."
        )
    if messages and " hashed 0 " not in messages[-1]:  # something was hashed: say what it cost
        pulumi.log.info(messages[-1])
    return weights.parse_digest(stdout), weights.parse_bytes(stdout)


class ModelWeights(pulumi.ComponentResource):
    """The weights at model.path on the head and every worker, identical by manifest; kept on destroy."""

    manifest_digest: pulumi.Output[str]
    path: pulumi.Output[str]
    size: pulumi.Output[int | None]
    """The weights' bytes by the head copy's manifest once its step ran, else `size_now`."""
    size_now: int | None
    """The weights' bytes by their source's manifest as this program run read it (weights.weights_size)."""

    def __init__(self, name: str, args: ModelWeightsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:ModelWeights", name, None, opts)
        plan = args.plan
        steps = args.steps
        head = plan.head
        conn = args.connections

        def token(node: NodePlan) -> str:
            observation = (args.observations or {}).get(node.name)
            return noted_step_token(
                observation,
                weights.DRIFT_STEP,
                steps.live(node, observation.facts) if observation else None,
                on_first_run=lambda why: f"{why}: `pulumi up` puts the weights at {steps.path}",
                on_drift=lambda why: f"drift: {why} (weights at {steps.path}); `pulumi up` syncs what differs",
            )

        retention = {
            node.name: NodeCommand(
                f"{name}-{node.name}-retention",
                connection=conn[node.name],
                script=steps.retention[node.name],
                delete_phase=RETENTION_DELETE_PHASE if steps.purges[node.name] else None,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for node in plan.nodes
        }
        # What the head's copy is made from: changing any of it re-obtains and re-syncs every worker.
        identity = list(steps.identity)
        head_deps: list[pulumi.Resource] = [retention[head.name]]
        tokens = {node.name: token(node) for node in plan.nodes}
        digest: pulumi.Output[str]
        head_copy: NodeCommand | OperatorCommand
        local_bytes: int | None = None
        if steps.local_dir is not None:
            # A rollback pins the digest it names: the operator's directory (edited since, maybe) is not read.
            local_digest, local_bytes = (steps.restore, None) if steps.restore else local_manifest(steps.local_dir)
            head_copy = OperatorCommand(
                f"{name}-{head.name}",
                script=steps.head_script(tokens[head.name]),
                # The ssh command (key path, host key, port) is no trigger: a new one re-runs nothing.
                environment={
                    weights_sync.SSH_ENV: "\n".join(ssh_command(head.ssh)),
                    weights_sync.SSH_TARGET_ENV: ssh_destination(head.ssh),
                },
                triggers=[*identity, local_digest, tokens[head.name]],
                opts=pulumi.ResourceOptions(parent=self, depends_on=head_deps),
            )
            # Known at program run: preview shows exactly whether the group restarts. A rollback's restore puts the
            # kept version back on the head instead: its digest.
            digest = pulumi.Output.from_input(steps.restore or local_digest)
        else:
            if steps.hf_env_script is not None:
                head_deps.append(
                    NodeCommand(
                        f"{name}-{head.name}-hf-token",
                        connection=conn[head.name],
                        script=pulumi.Output.secret(steps.hf_env_script),
                        delete=steps.hf_env_delete,
                        secret=True,
                        opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
                    )
                )
            head_copy = NodeCommand(
                f"{name}-{head.name}",
                connection=conn[head.name],
                script=steps.head_script(tokens[head.name]),
                triggers=[*identity, tokens[head.name]],
                # A new connection must not lose the digest the group restarts on: the update reprints it.
                update=steps.head_digest_command,
                opts=pulumi.ResourceOptions(parent=self, depends_on=head_deps),
            )
            digest = head_copy.stdout.apply(weights.parse_digest)
        if plan.workers:
            # One step for every worker: workers relay files to each other (scripts/fanout.py), so it cannot be
            # one independent step per worker. A drifted worker re-runs it; the others then receive nothing.
            NodeCommand(
                f"{name}-workers",
                # Runs on the head: the bytes go over the fabric, never through this machine.
                connection=conn[head.name],
                script=steps.fanout_script(tokens),
                triggers=[head_copy.id, digest, steps.path, *(f"{w.name}={tokens[w.name]}" for w in plan.workers)],
                opts=pulumi.ResourceOptions(
                    parent=self, depends_on=[head_copy, *(retention[w.name] for w in plan.workers)]
                ),
            )
        self.manifest_digest = digest
        self.path = pulumi.Output.from_input(steps.path)
        # What the memory admission counts where a node has no copy yet (preview's warning before any step ran).
        head_seen = (args.observations or {}).get(head.name)
        size_now = weights.weights_size(head_seen.facts if head_seen else {}, local_bytes)
        self.size_now = size_now
        self.size = head_copy.stdout.apply(lambda out: weights.parse_bytes(out) or size_now)
        self.register_outputs({"manifest_digest": self.manifest_digest, "path": self.path})
