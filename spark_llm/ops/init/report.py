"""What `spark-llm init` found on each node, shown: a line for the person running it, an object for `--json`."""

from __future__ import annotations

from typing import Any

from spark_llm.ops.init import host_keys
from spark_llm.ops.init.document import Found


def as_json(found: Found) -> dict[str, Any]:
    """What init found on one node, for `--json` (scripts)."""
    f = found.facts
    iface = f.fabric_interface or ""
    address = f.address_on(iface)
    return {
        "node": found.ssh.name,
        "role": found.role,
        "address": found.ssh.host,
        "hostname": f.hostname,
        "host_key": host_keys.describe(found.ssh.host_key),
        "arch": f.arch,
        "gpus": list(f.gpus),
        "mem_total_bytes": f.mem_total,
        "disk_free_bytes": f.disk_free,
        "fabric": {"interface": iface or None, "address": str(address) if address else None,
                   "mtu": f.interfaces[iface].mtu if iface in f.interfaces else None, "roce_devices": f.twins(iface)},
        "management_interface": f.management_interface,
        "docker_runtimes": list(f.runtimes) if f.runtimes is not None else None,
    }  # fmt: skip


def describe(found: Found) -> str:
    """One line per node for the person running init: what was found."""
    f = found.facts
    iface = f.fabric_interface or "-"
    mtu = f.interfaces[iface].mtu if iface in f.interfaces else "?"
    mem = f"{f.mem_total / 1024**3:.1f} GiB" if f.mem_total else "memory unread"
    disk = f"{f.disk_free / 1e9:.0f} GB free at {f.disk_mount}" if f.disk_free else "free disk unread"
    return (
        f"{found.ssh.name}: {f.hostname} {f.arch}, {', '.join(f.gpus) or 'no GPU shown'}, {mem}, {disk};"
        f" fabric {iface} {f.address_on(iface) or ''} mtu {mtu} RoCE {' '.join(f.twins(iface)) or '-'};"
        f" management {f.management_interface or '?'}; docker runtimes {' '.join(f.runtimes or ()) or '?'}"
    )
