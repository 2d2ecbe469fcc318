"""The host as it was when it last worked, read over ssh (read-only): what the readiness gate records at a start
that served, and the changes since that a failed start's error repeats (spark_llm.plan.host_record)."""

from __future__ import annotations

from collections.abc import Sequence

from spark_llm.group.history import HostFields, StartRecord, succeeded
from spark_llm.plan.host_record import changes_warning, engine_nccl, host_changes, parse_host_lines
from spark_llm.remote.fabric_proof import Rank, read_nccl_lines
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import RemoteError


def read_hosts(ranks: Sequence[Rank], probe: str) -> dict[str, HostFields]:
    """Each node's host now (a node that cannot be read now is left out: nothing to compare)."""
    hosts = {}
    for rank in ranks:
        try:
            hosts[rank.name] = parse_host_lines(run_script(rank.ssh, probe, timeout=60))
        except RemoteError:
            continue
    return hosts


def record_hosts(
    ranks: Sequence[Rank], probe: str, container: str, nccl_logs: dict[str, str] | None
) -> dict[str, HostFields]:
    """The hosts a start that served records, with the NCCL version each engine loaded (from its log)."""
    hosts = read_hosts(ranks, probe)
    logs = nccl_logs if nccl_logs is not None else read_nccl_lines(ranks, container)
    for node, fields in hosts.items():
        fields["nccl"] = engine_nccl(logs.get(node, ""))
    return hosts


def changes_since_served(ranks: Sequence[Rank], probe: str, history: list[StartRecord]) -> str:
    """What changed on the hosts since the latest start that served ("" when nothing, or none was recorded)."""
    served = [r for r in succeeded(history) if r.get("hosts")]
    if not served:
        return ""
    last = served[-1]
    changes = host_changes(last.get("hosts", {}), read_hosts(ranks, probe))
    return changes_warning(changes, last.get("at", "?")) if changes else ""
