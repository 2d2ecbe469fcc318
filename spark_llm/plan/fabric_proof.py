"""Pure: the fabric proof's reach into a node: which of its engine's log lines are read (one start's, the NCCL
transport and version lines), and what a node says of a fallback's usual causes, most likely first. The lines
themselves are read by spark_llm.group.fabric (the readiness gate's and the supervisor's one reader).

A wrong NCCL_IB_HCA, a container without /dev/infiniband or a low memlock make NCCL fall back to sockets quietly:
the model serves at a fraction of the link's speed. The readiness gate (spark_llm.remote.readiness) reads the lines
after rank 0 served and fails the start on a fallback (or warns: spark-llm:network.fabricProof); the supervisor's
restarts record them (status and preview then say so).
"""

from __future__ import annotations

import shlex

from spark_llm.group.history import FabricRecord
from spark_llm.group.logs import logs_command

# The lines the proof reads, and the NCCL and vLLM version lines the host record reads (one pass over the log).
_GREP = r"NCCL INFO (NET/|Using network |Channel .* via NET/)|NCCL version [0-9]|vLLM is using nccl=="
# What NCCL prints once a process (the `Using` lists the channels' indices point into, the version lines): kept
# whatever the tail of the rest keeps. POSIX ERE without backslashes: awk's -v would read them as escapes.
_ONCE = (
    "NCCL INFO NET/IB[A-Za-z0-9_]* : (Using|No device found|Made virtual device)|NCCL INFO NET/Socket : Using"
    "|NCCL version [0-9]|vLLM is using nccl=="
)
# Prints the once-lines as they come and the last `keep` of the others at the end.
_KEEP_ONCE = (
    "$0 ~ once { print; next } { tail[n++ % keep] = $0 }"
    " END { for (i = (n > keep ? n - keep : 0); i < n; i++) print tail[i % keep] }"
)
LINES_KEPT = 400
"""NCCL lines read per node besides the once-a-process ones: INIT,NET prints a few dozen per communicator."""


def nccl_lines_command(container: str) -> str:
    """Read-only bash on a node: its engine's NCCL transport and version lines and vLLM's NCCL line, of the
    container's current run only; the `Using` and version lines all, the others' last LINES_KEPT (nothing when the
    container is gone)."""
    keep = f"awk -v keep={LINES_KEPT} -v once={shlex.quote(_ONCE)} {shlex.quote(_KEEP_ONCE)}"
    return f"{logs_command(container, since_start=True)} | {{ grep -aE {shlex.quote(_GREP)} || true; }} | {keep}\n"


# What a node says about the usual causes of a fallback, one `key<TAB>value` line each (read-only).
_CAUSES_SCRIPT = r"""c=$1
printf 'sys_devices\t%s\n' "$(ls /sys/class/infiniband 2>/dev/null | tr '\n' ' ')"
printf 'container_devices\t%s\n' "$(docker exec "$c" ls /dev/infiniband 2>/dev/null | tr '\n' ' ')"
pid=$(docker inspect -f '{{.State.Pid}}' "$c" 2>/dev/null || true)
printf 'memlock\t%s\n' "$(awk '/^Max locked memory/ {print $4}' "/proc/$pid/limits" 2>/dev/null)"
printf 'env\t%s\n' "$(docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$c" 2>/dev/null \
  | grep -E '^NCCL_(IB_HCA|IB_GID_INDEX|IB_DISABLE|NET|SOCKET_IFNAME)=' | tr '\n' ' ')"
"""


def causes_command(container: str) -> str:
    """Read-only bash on a node whose rank fell back: what `fallback_causes` weighs."""
    return f"bash -s -- {shlex.quote(container)} <<'SPARK_LLM_CAUSES'\n{_CAUSES_SCRIPT}SPARK_LLM_CAUSES\n"


def fallback_causes(node: str, text: str, expected: tuple[str, ...]) -> list[str]:
    """The likely causes of a fallback on `node`, from what `causes_command` printed, most likely first."""
    facts = dict(line.split("\t", 1) for line in text.splitlines() if "\t" in line)
    env = dict(item.split("=", 1) for item in facts.get("env", "").split() if "=" in item)
    listed = facts.get("sys_devices", "").split()
    causes = []
    unknown = [d for d in expected if d not in listed]
    if unknown:
        causes.append(
            f"NCCL_IB_HCA names {','.join(unknown)}, which {node}'s /sys/class/infiniband does not list (it lists"
            f" {', '.join(listed) or 'no RDMA device'}): set spark-llm:network.roceDevices to the devices"
            " `ibdev2netdev` shows Up"
        )
    if not facts.get("container_devices", "").split():
        causes.append("the engine's container has no /dev/infiniband (not mounted from the node)")
    memlock = facts.get("memlock", "").strip()
    if memlock and memlock != "unlimited":
        causes.append(
            f"the container's memlock limit is {memlock} bytes, not unlimited (RDMA registration fails:"
            " spark-llm:network.memlockBytes -1)"
        )
    if env.get("NCCL_IB_DISABLE", "0") not in ("", "0") or env.get("NCCL_NET", "").lower() == "socket":
        causes.append("the engine's environment turns IB off (NCCL_IB_DISABLE or NCCL_NET)")
    gid = env.get("NCCL_IB_GID_INDEX")
    causes.append(
        f"else: the RoCE GID index ({f'NCCL_IB_GID_INDEX={gid}' if gid else 'NCCL_IB_GID_INDEX unset: NCCL picks one'})"
        f" or NCCL_SOCKET_IFNAME={env.get('NCCL_SOCKET_IFNAME', '(unset)')} (the OOB interface must be the fabric's)"
    )
    return causes


def fallback_message(node: str, role: str, record: FabricRecord, causes: list[str]) -> str:
    """What the gate says of one rank whose transport is not what the stack asked."""
    lines = [f"{node} ({role}): {record.get('problem')}."]
    lines += [f"  likely cause: {cause}" for cause in causes]
    return "\n".join(lines)
