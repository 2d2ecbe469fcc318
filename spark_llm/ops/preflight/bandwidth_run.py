"""`spark-llm preflight --bandwidth`: head <-> each worker over the fabric, one worker after another (a shared
head link would otherwise split the figure), each a few seconds and bounded; the verdicts are in
preflight.bandwidth.

The worker's server is stopped by this process as soon as the test ends, and on any way out of it (an error,
Ctrl-C); if this process is killed outright, the server's own bound (`timeout` on the node) ends it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from spark_llm.ops.preflight import bandwidth
from spark_llm.ops.preflight.bandwidth import Choice, NodeFacts
from spark_llm.ops.preflight.checks import Check
from spark_llm.ops.render import FAIL
from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.remote.runner import NodeRun, run

# Seconds for the short steps (facts, a server's start, its stop).
STEP_TIMEOUT = 60


def _facts(plan: DeploymentPlan, node: NodePlan) -> NodeRun:
    return run(node.ssh, bandwidth.facts_script(plan, node), timeout=STEP_TIMEOUT)


def _pair(plan: DeploymentPlan, worker: NodePlan, choice: Choice, port: int, seconds: int) -> dict[str, float | str]:
    """Server on the worker, client on the head; the server stopped whatever happens, also when Ctrl-C comes while
    it starts (it is found by its port then, not by the handle its start had not printed yet)."""
    assert choice.worker is not None and choice.worker.how is not None
    try:
        started = run(worker.ssh, bandwidth.serve_script(choice, plan, worker, port, seconds), timeout=STEP_TIMEOUT)
        handle = bandwidth.server_handle(started.stdout)
        if not started.ok or handle is None:
            said = (started.stdout + started.stderr).strip().splitlines()
            return {"to": f"the {choice.tool} server did not start: {said[-1] if said else f'exit {started.code}'}"}
        client = run(
            plan.head.ssh,
            bandwidth.client_script(choice, plan, worker, port, seconds),
            timeout=2 * (seconds + 1) + 45,
        )
        if client.ssh_failed:
            return {"to": f"the client on {plan.head.name} did not finish: {client.stderr.strip()[-200:]}"}
        if choice.tool == "ib_write_bw":
            return {"to": bandwidth.ib_write_bw_mbit(client.stdout)}
        return bandwidth.iperf3_mbit(client.stdout)
    finally:
        run(worker.ssh, bandwidth.stop_script(choice.worker.how, port), timeout=STEP_TIMEOUT)


def measure(plan: DeploymentPlan, port: int, seconds: int, update: Callable[[str], None] | None = None) -> list[Check]:
    """One `bandwidth` check per worker."""
    with ThreadPoolExecutor(max_workers=len(plan.nodes)) as pool:
        runs = dict(zip([n.name for n in plan.nodes], pool.map(lambda n: _facts(plan, n), plan.nodes), strict=True))
    facts: dict[str, NodeFacts] = {
        name: bandwidth.parse_facts(r.stdout) for name, r in runs.items() if r.ok and not r.ssh_failed
    }
    head = facts.get(plan.head.name)
    checks = []
    for worker in plan.workers:
        own = facts.get(worker.name)
        if head is None or own is None:
            unread = [n for n in (plan.head.name, worker.name) if n not in facts]
            checks.append(bandwidth.skipped(worker, f"not measured: {', '.join(unread)} could not be read"))
            continue
        choice = bandwidth.choose(plan, worker, head, own)
        if choice.tool is None:
            checks.append(Check(worker.name, "bandwidth", FAIL, "not measured: " + choice.missing, choice.fix))
            continue
        if update is not None:
            update(f"preflight: {choice.tool} between {plan.head.name} and {worker.name} ({seconds} s each way)")
        figures = _pair(plan, worker, choice, port, seconds)
        speeds = [s for s in (head.speed_mbit, own.speed_mbit) if s is not None]
        checks.append(bandwidth.verdict(plan, worker, choice, figures, min(speeds) if speeds else None))
    return checks
