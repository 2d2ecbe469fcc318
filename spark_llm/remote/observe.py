"""What every node runs now: one read-only ssh session per node at each program run (preview and up).

pulumi-command runs nothing during preview and reads nothing on refresh, and the docker provider's refresh sees
one container at a time. Drift is a fact about the whole group (a worker that died takes the engine's process
group with it), so the program looks once per run: for each node, the engine container's state and labels, the
image's ID, the weights' manifest digest and the tokens the last `pulumi up` left there (spark_llm.plan.drift turns
these into the values that make Pulumi restart what must be restarted, and nothing else).

The probe is read-only (`docker inspect`, `cat`, a manifest scan that hashes only files whose stat changed) and
each node gets one ssh connection (workers through the head's multiplexed connection), kept for the next program
run within a minute (spark_llm.remote.ssh.control_dir).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.observation import NodeObservation, parse_probe, split_probe, stack_probe
from spark_llm.remote.runner import run as run_node
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import HostKeyMismatchError, RemoteError


def _observe_node(
    groups: Sequence[tuple[DeploymentPlan, Callable[[NodePlan], str]]], node: NodePlan, run: str
) -> dict[int, NodeObservation]:
    """Every group's observation of `node`, read in one ssh session, by the group's index."""
    scripts = [(plan, extra(node) if any(n.name == node.name for n in plan.nodes) else "") for plan, extra in groups]
    on_node = [i for i, (plan, _) in enumerate(groups) if any(n.name == node.name for n in plan.nodes)]
    try:
        out = run_script(node.ssh, stack_probe(scripts, node), timeout=60)
    except RemoteError as err:
        refused = err.node if isinstance(err, HostKeyMismatchError) else None
        failed = NodeObservation(node=node.name, error=err.one_line(), host_key_refused=refused, run=run)
        return {i: failed for i in on_node}
    parts = split_probe(out)
    return {i: parse_probe(node.name, parts.get(i, ""), run) for i in on_node}


def observe_stack(
    groups: Sequence[tuple[DeploymentPlan, Callable[[NodePlan], str]]],
) -> list[dict[str, NodeObservation]]:
    """Every group's observation of each of its nodes, each node read once (one ssh session for every group on it),
    in parallel once the head's ssh connection is up (workers ride on it: a worker's jump through the head is not a
    second connection to the head). `groups`: each group's plan and its `extra(node)`, more read-only probe bash
    for that node (see `probe_script`). Returned in the groups' order."""
    run = secrets.token_hex(8)
    nodes: dict[str, NodePlan] = {}
    for plan, _ in groups:
        for member in plan.nodes:
            nodes.setdefault(member.name, member)
    head = groups[0][0].head
    if len(nodes) > 1:
        # The head's master connection first (a no-op; a failure here shows again in the head's probe), so that
        # the workers' jumps find it instead of each opening a connection of their own.
        run_node(head.ssh, "true\n", timeout=60, multiplex=True)
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        seen = list(pool.map(lambda n: _observe_node(groups, n, run), nodes.values()))
    out: list[dict[str, NodeObservation]] = [{} for _ in groups]
    for by_group in seen:
        for index, observation in by_group.items():
            out[index][observation.node] = observation
    return out
