"""Firewall: spark-llm:network.firewall fabric-only, a NodeCommand per node that installs spark-llm's own nftables
table (`table inet spark-llm`, spark_llm.plan.firewall) and whose delete removes it: `pulumi destroy`, or the
firewall turned off (the resource is no longer declared). The table's content is in the step's script, so in its
digest (a trigger): a changed ruleset (another distPort, the Ray executor) installs the new table. The engine group
waits for it: the engines start behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_command as command

from components.commands import NodeCommand
from spark_llm.plan.deployment import DeploymentPlan


@dataclass(frozen=True, kw_only=True)
class FirewallArgs:
    plan: DeploymentPlan
    """The deployment plan: the nodes."""
    scripts: dict[str, str]
    """Each node's firewall step (spark_llm.plan.steps.build_steps: spark_llm.plan.firewall.steps)."""
    connections: dict[str, command.remote.ConnectionArgs]
    """pulumi-command's connection to each node, by node name (components.connection.command_connection)."""


class Firewall(pulumi.ComponentResource):
    """The group's ports refused on each node but on the fabric interfaces."""

    steps: dict[str, NodeCommand]

    def __init__(self, name: str, args: FirewallArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:Firewall", name, None, opts)
        self.steps = {
            node.name: NodeCommand(
                f"{name}-{node.name}",
                connection=args.connections[node.name],
                script=args.scripts[node.name],
                # The script run again with $SPARK_LLM_PHASE=delete: it removes the table, and only it.
                delete_phase="delete",
                # One table name on the node: the old step's delete (which removes the table) must run before the
                # new one installs it, not after.
                opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
            )
            for node in args.plan.nodes
        }
        self.register_outputs({"nodes": sorted(self.steps)})
