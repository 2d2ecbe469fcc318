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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.observation import NodeObservation, parse_probe, probe_script
from spark_llm.remote.runner import run as run_node
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import HostKeyMismatchError, RemoteError


def _observe_node(plan: DeploymentPlan, node: NodePlan, extra: str, run: str) -> NodeObservation:
    try:
        out = run_script(node.ssh, probe_script(plan, node, extra), timeout=60)
    except RemoteError as err:
        refused = err.node if isinstance(err, HostKeyMismatchError) else None
        return NodeObservation(node=node.name, error=err.one_line(), host_key_refused=refused, run=run)
    return parse_probe(node.name, out, run)


def observe(plan: DeploymentPlan, extra: Callable[[NodePlan], str] = lambda _: "") -> dict[str, NodeObservation]:
    """Every node's observation, read in parallel once the head's ssh connection is up (workers ride on it: a
    worker's jump through the head is not a second connection to the head).

    `extra(node)`: more read-only probe bash for that node (see `probe_script`).
    """
    run = secrets.token_hex(8)
    if plan.workers:
        # The head's master connection first (a no-op; a failure here shows again in the head's probe), so that
        # the workers' jumps find it instead of each opening a connection of their own.
        run_node(plan.head.ssh, "true\n", timeout=60, multiplex=True)
    with ThreadPoolExecutor(max_workers=len(plan.nodes)) as pool:
        seen = list(pool.map(lambda n: _observe_node(plan, n, extra(n), run), plan.nodes))
    return {o.node: o for o in seen}
