"""The memory admission of each node (spark_llm.plan.memory): a warning in `pulumi preview`, a step per node that
every stop step of the group waits for in `pulumi up`, and the opt-in page cache drop before each engine starts.

The steps carry the stop steps' triggers, so they run exactly when the group restarts: a node that cannot fit
fails `up` before the first member (or the supervisor) stops, and the group that runs keeps serving.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence

import pulumi
import pulumi_command as command

from components.commands import discarding_stdin
from spark_llm.group.memory import FITS
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.memory import admission_spec, judge_spec, probe_command, spec_text
from spark_llm.plan.observation import NodeObservation


def probe(plan: DeploymentPlan) -> str:
    """The read-only probe sections every node prints at each program run (spark_llm.remote.observe)."""
    return probe_command(plan.model_path)


def note_memory(plan: DeploymentPlan, observations: dict[str, NodeObservation] | None) -> None:
    """`pulumi preview` and `up` warn of each node whose engine would not fit now, with the numbers and the fix (a
    node that could not be read is named once by components.bootstrap)."""
    for node in plan.nodes:
        seen = (observations or {}).get(node.name)
        if seen is None or seen.error is not None:
            continue
        admission = judge_spec(admission_spec(plan, node), seen.facts)
        if admission.verdict != FITS:
            pulumi.log.warn(admission.line() + " (checked again by `pulumi up` before anything stops)")


def admission_steps(
    name: str, plan: DeploymentPlan, triggers: Sequence[pulumi.Input[str]], opts: pulumi.ResourceOptions
) -> list[command.local.Command]:
    """One step a node, run here (it reads the node over ssh): fails when the node's engine cannot fit now."""
    return [
        command.local.Command(
            f"{name}-{node.name}",
            create=f"{shlex.quote(sys.executable)} -m spark_llm.ops.admission",
            # A changed spec alone (no restart) re-judges nothing: only a restart needs the memory.
            update=discarding_stdin("echo 'spark-llm: memory admission settings recorded'"),
            logging=command.local.Logging.STDOUT,
            stdin=spec_text(admission_spec(plan, node)),
            triggers=list(triggers),
            add_previous_output_in_env=False,
            opts=opts,
        )
        for node in plan.nodes
    ]
