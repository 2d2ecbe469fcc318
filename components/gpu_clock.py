"""GpuClockCaps: spark-llm:nodes[].smClockCapMhz, a NodeCommand per capped node in the stack's room (the cap is the
node's, whatever models run there) whose create locks the GPU's SM clock and whose delete resets it: `pulumi
destroy`, or the key unset (the resource is no longer declared). The cap and the drift token are in the step's
script, so in its digest (a trigger): another cap, or a node whose lock is gone (a reboot, `nvidia-smi -rgc`,
spark_llm.plan.gpu_clock), applies it again. Beside the groups: no engine waits for it, as a cap changed at any time
by hand needs no restart either.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import pulumi
import pulumi_command as command

from components.commands import NodeCommand
from components.connection import command_connection
from components.drift_notes import noted_step_token
from spark_llm.plan import gpu_clock
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.observation import NodeObservation


@dataclass(frozen=True, kw_only=True)
class GpuClockCapsArgs:
    caps: dict[str, int]
    """Each capped node's cap in MHz, by node name (spark-llm:nodes[].smClockCapMhz)."""
    hosts: dict[str, SshHost]
    """How ssh reaches each node."""
    keys: dict[str, str]
    """Each node's ssh private key, by node name (components.bootstrap.load_keys)."""
    commands: command.Provider
    """The stack's pulumi-command provider."""
    observations: dict[str, NodeObservation] | None = None
    """What each node reads now (its record, its clock); None: not looked at (unit tests)."""


class GpuClockCaps(pulumi.ComponentResource):
    """Each capped node's GPU SM clock held under its cap."""

    steps: dict[str, NodeCommand]

    def __init__(self, name: str, args: GpuClockCapsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("spark-llm:components:GpuClockCaps", name, None, opts)
        self.steps = {}
        for node, cap in args.caps.items():
            observation = (args.observations or {}).get(node)
            token = noted_step_token(
                gpu_clock.recorded(observation) if observation else None,
                gpu_clock.STEP,
                gpu_clock.live(observation) if observation else None,
                on_drift=partial(gpu_clock.drift_warning, node),
            )
            self.steps[node] = NodeCommand(
                f"{name}-{node}",
                connection=command_connection(args.hosts[node], args.keys),
                script=gpu_clock.step_script(cap, token, args.hosts[node].user),
                # The script run again with $SPARK_LLM_PHASE=delete: it resets the lock and removes the record.
                delete_phase="delete",
                # One lock on the node: the old step's reset must run before the new one locks, not after it.
                opts=pulumi.ResourceOptions(parent=self, provider=args.commands, delete_before_replace=True),
            )
        self.register_outputs({"nodes": sorted(self.steps)})
