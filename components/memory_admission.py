"""The memory admission of each node (spark_llm.plan.memory): a warning in `pulumi preview`, a step per node that
every stop step of the group waits for in `pulumi up`, and the opt-in page cache drop before each engine starts.

The steps carry the stop steps' triggers and a token that is new at every run while the group is to stop
(spark_llm.plan.memory.admission_token): every `up` that stops the group judges every member first, even after an
`up` that failed once some of them had passed; a node that cannot fit fails `up` before the first member (or the
supervisor) stops, and the group that runs keeps serving. A no-op `up` runs none of them.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from functools import partial

import pulumi
import pulumi_command as command

from components.commands import discarding_stdin
from spark_llm.group.memory import FITS
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.drift import restart_pending
from spark_llm.plan.memory import admission_spec, admission_token, judge_spec, probe_command, spec_text
from spark_llm.plan.observation import NodeObservation


def probe(plan: DeploymentPlan) -> str:
    """The read-only probe sections every node prints at each program run (spark_llm.remote.observe)."""
    return probe_command(plan.model_path)


def note_memory(
    plan: DeploymentPlan, observations: dict[str, NodeObservation] | None, weights_bytes: int | None = None
) -> None:
    """`pulumi preview` and `up` warn of each node whose engine would not fit now, with the numbers and the fix (a
    node that could not be read is named once by components.bootstrap). `weights_bytes`: the weights' size by their
    source (components.model_weights), counted before they are on the node."""
    for node in plan.nodes:
        seen = (observations or {}).get(node.name)
        if seen is None or seen.error is not None:
            continue
        admission = judge_spec(admission_spec(plan, node, weights_bytes=weights_bytes), seen.facts)
        if admission.verdict != FITS:
            pulumi.log.warn(admission.line() + " (checked again by `pulumi up` before anything stops)")


def admission_tokens(
    plan: DeploymentPlan,
    observations: dict[str, NodeObservation] | None,
    labels: Mapping[str, str],
    image_ids: Mapping[str, str],
) -> dict[str, str]:
    """Each node's admission token, from the restart inputs the group's containers must carry (`labels`, and each
    node's image ID): new at this run when any member lacks them, as the group then stops."""
    members = [n.name for n in plan.nodes]
    head_image = image_ids.get(plan.head.name, "")
    restart = restart_pending(observations, members, dict(labels), head_image)
    return {n.name: admission_token((observations or {}).get(n.name), restart) for n in plan.nodes}


def _token_of(node: str, tokens: Mapping[str, str]) -> str:
    return tokens[node]


def _spec_of(plan: DeploymentPlan, node: NodePlan, got: list) -> str:
    return spec_text(admission_spec(plan, node, token=got[0], weights_bytes=got[1]))


def admission_steps(
    name: str,
    plan: DeploymentPlan,
    triggers: Sequence[pulumi.Input[str]],
    tokens: pulumi.Output[dict[str, str]],
    weights_bytes: pulumi.Input[int | None],
    opts: pulumi.ResourceOptions,
) -> list[command.local.Command]:
    """One step a node, run here (it reads the node over ssh): fails when the node's engine cannot fit now."""
    steps = []
    for node in plan.nodes:
        token = tokens.apply(partial(_token_of, node.name))
        spec = pulumi.Output.all(token, weights_bytes).apply(partial(_spec_of, plan, node))
        steps.append(
            command.local.Command(
                f"{name}-{node.name}",
                create=f"{shlex.quote(sys.executable)} -m spark_llm.ops.admission",
                # A changed spec alone (no restart) re-judges nothing: only a restart needs the memory.
                update=discarding_stdin("echo 'spark-llm: memory admission settings recorded'"),
                logging=command.local.Logging.STDOUT,
                stdin=spec,
                triggers=[*triggers, token],
                add_previous_output_in_env=False,
                opts=opts,
            )
        )
    return steps
