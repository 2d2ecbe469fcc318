"""Firewall: spark-llm:network.firewall fabric-only, a NodeCommand per node that installs spark-llm's own nftables
table (`table inet spark-llm`, spark_llm.plan.firewall) and whose delete removes it: `pulumi destroy`, or the
firewall turned off (the resource is no longer declared). The table's content is in the step's script, so in its
digest (a trigger): a changed ruleset (another distPort, the Ray executor) installs the new table. A table gone or
changed on the node (a reboot: nothing persists it; `nft flush ruleset`) is drift: its token changes and `pulumi up`
installs it again. The engine group waits for it: the engines start behind it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import pulumi
import pulumi_command as command

from components.commands import NodeCommand
from components.drift_notes import noted_step_token
from spark_llm.plan import firewall
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.observation import NodeObservation


@dataclass(frozen=True, kw_only=True)
class FirewallArgs:
    plan: DeploymentPlan
    """The deployment plan: the nodes."""
    rules: dict[str, str]
    """Each node's table (spark_llm.plan.steps.build_steps: spark_llm.plan.firewall.steps)."""
    connections: dict[str, command.remote.ConnectionArgs]
    """pulumi-command's connection to each node, by node name (components.connection.command_connection)."""
    observations: dict[str, NodeObservation] | None = None
    """What every node has now (its table's digest); None: not looked at (unit tests)."""


class Firewall(pulumi.ComponentResource):
    """The group's ports refused on each node but on the fabric interfaces."""

    steps: dict[str, NodeCommand]

    def __init__(self, name: str, args: FirewallArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:Firewall", name, None, opts)
        self.steps = {}
        for node in args.plan.nodes:
            observation = (args.observations or {}).get(node.name)
            token = noted_step_token(
                observation,
                firewall.STEP,
                firewall.live(observation) if observation else None,
                on_drift=partial(firewall.drift_warning, node),
            )
            self.steps[node.name] = NodeCommand(
                f"{name}-{node.name}",
                connection=args.connections[node.name],
                script=firewall.step_script(node, args.rules[node.name], token, args.plan.own(firewall.TABLE)),
                # The script run again with $SPARK_LLM_PHASE=delete: it removes the table (and only it) and its token.
                delete_phase="delete",
                triggers=[token],
                # One table name on the node: the old step's delete (which removes the table) must run before the
                # new one installs it, not after.
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
        self.register_outputs({"nodes": sorted(self.steps)})
