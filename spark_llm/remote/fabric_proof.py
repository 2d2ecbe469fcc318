"""The fabric proof at a start that served: each rank's NCCL lines read over ssh (read-only), judged by
spark_llm.plan.fabric_proof; the readiness gate (spark_llm.remote.readiness) records them and fails or warns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spark_llm.group.fabric import fabric_records, transport_summary
from spark_llm.group.history import FabricRecord
from spark_llm.plan.fabric_proof import causes_command, fallback_causes, fallback_message, nccl_lines_command
from spark_llm.plan.hosts import SshHost
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import RemoteError


@dataclass(frozen=True)
class Rank:
    name: str
    role: str
    ssh: SshHost
    fabric_address: str


@dataclass(frozen=True)
class FabricProof:
    records: dict[str, FabricRecord]
    """Each rank's transport, as the start records it."""
    logs: dict[str, str]
    """Each node's NCCL lines (the host record reads the NCCL version from them)."""
    problems: str
    """What is wrong, rank by rank, with the likely causes ("" when every rank uses RoCE as asked)."""


def read_nccl_lines(ranks: Sequence[Rank], container: str) -> dict[str, str]:
    """Each node's NCCL lines ("" for a node that cannot be read now: its proof says unknown)."""
    logs = {}
    for rank in ranks:
        try:
            logs[rank.name] = run_script(rank.ssh, nccl_lines_command(container), timeout=60)
        except RemoteError:
            logs[rank.name] = ""
    return logs


def prove_fabric(
    ranks: Sequence[Rank], container: str, expected: tuple[str, ...], say: Callable[[str], None]
) -> FabricProof:
    """Read every rank's transport; name each rank that is not on the RoCE devices the stack asked for."""
    logs = read_nccl_lines(ranks, container)
    records = fabric_records(logs, {r.name: r.fabric_address for r in ranks}, expected)
    problems = []
    for rank in ranks:
        record = records.get(rank.name, {})
        say(f"[{rank.name}] fabric: {transport_summary(record)}")
        if not record.get("problem"):
            continue
        try:
            facts = run_script(rank.ssh, causes_command(container), timeout=60)
        except RemoteError as err:
            facts = f"unreadable\t{str(err).splitlines()[0]}"
        problems.append(fallback_message(rank.name, rank.role, record, fallback_causes(rank.name, facts, expected)))
    return FabricProof(records, logs, "\n".join(problems))
