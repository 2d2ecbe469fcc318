"""Which weights a rollback serves: the ones the last good start served, put back where a relaunch replaced them.

A relaunch that changes the weights keeps the version it replaces on every node (scripts/manifest.py keep: hard links
under model.path/.spark-llm-versions, no byte copied) until the next start that serves. `spark-llm rollback` reads
the digest the last good start recorded in the head's history (spark_llm.remote.readiness.served_weights) and every
node's current and kept versions: where a node runs other weights, the rollback's `pulumi up` puts that version back
(SPARK_LLM_RESTORE_WEIGHTS: the weights steps restore instead of copying, spark_llm.plan.weights.steps); where a node
holds it nowhere, the rollback is refused with the truth rather than serving the old flags on other weights
(issue 31, 1: it once said "no weights copied" and served the old revision on the new files).
"""

from __future__ import annotations

import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from spark_llm.group.history import succeeded
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.rollback import RollbackRefusedError
from spark_llm.plan.weights.steps import MANIFEST_NAME, VERSIONS_DIR, stored_digest_command
from spark_llm.remote.history import read_history
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import RemoteError

RESTORE_ENV = "SPARK_LLM_RESTORE_WEIGHTS"
"""Read by the program (components.bootstrap.restore_weights)."""
RESTORE_MODEL_ENV = "SPARK_LLM_RESTORE_MODEL"
"""The model whose weights RESTORE_ENV names, when the stack lists several: the other groups keep theirs."""


@dataclass(frozen=True)
class RollbackWeights:
    digest: str
    """The weights the last good start served ("" when it recorded none: an older spark-llm)."""
    restore: bool
    """Some node runs other weights: the rollback's `up` puts the kept version back. Either way the rollback pins
    `digest` (the weights steps verify or restore it, never copying from the operator's source, which may have been
    edited since: issue 41, 5)."""
    note: str


def _versions_script(path: str) -> str:
    """On a node: its current manifest digest, then each version it kept, a line each."""
    versions = shlex.quote(f"{path}/{VERSIONS_DIR}")
    return stored_digest_command(path, "echo none") + (
        f'for d in {versions}/*/; do [ -f "$d{MANIFEST_NAME}" ] && basename "$d"; done; true\n'
    )


def weights_to_restore(plan: DeploymentPlan) -> RollbackWeights:
    """What the rollback does about the weights; raises RollbackRefusedError when a node no longer holds them."""
    starts = succeeded(read_history(plan.head.ssh, plan.history_path))
    digest = str(starts[-1].get("weights") or "") if starts else ""
    if not digest:
        return RollbackWeights(
            "", False, "the last good start recorded no weights digest: the weights stay as they are"
        )

    def look(node):  # (current digest, kept digests) of one node
        try:
            lines = run_script(node.ssh, _versions_script(plan.model_path), timeout=60).split()
        except RemoteError as err:
            why = str(err).splitlines()[0]
            raise RollbackRefusedError(f"{node.name} cannot be read ({why}); nothing was changed") from None
        return lines[0] if lines else "none", set(lines[1:])

    with ThreadPoolExecutor(max_workers=len(plan.nodes)) as pool:
        seen = dict(zip([n.name for n in plan.nodes], pool.map(look, plan.nodes), strict=True))
    missing = [name for name, (current, kept) in seen.items() if current != digest and digest not in kept]
    if missing:
        raise RollbackRefusedError(
            f"the last good start served weights {digest[:16]}, which {', '.join(missing)} no longer"
            f" hold{'s' if len(missing) == 1 else ''} (neither as model.path nor as a kept version): a rollback would"
            " serve that revision's flags on other weights. Nothing was changed. Fix the config and run `pulumi up`."
        )
    elsewhere = [name for name, (current, _) in seen.items() if current != digest]
    if not elsewhere:
        return RollbackWeights(digest, False, f"every node still has the weights {digest[:16]}: no weights copied")
    return RollbackWeights(
        digest,
        True,
        f"{', '.join(elsewhere)} run{'s' if len(elsewhere) == 1 else ''} other weights: the version {digest[:16]} they"
        " kept is put back (hard links: no byte copied)",
    )
