"""Pure: the head's script that copies the weights to every worker at once (scripts/fanout.py does the work).

One step for all workers, not one per worker: a worker that already has a file serves it to the next, so the
copy is a pipeline over the fabric instead of N copies through the head's uplink. The script carries the
manifest tool, the fan-out program and its JSON plan (addresses, pinned host keys, the fabric key's path on the
head, streams, transport, each worker's drift-token record); no secret: the one-time rsync secret is made on the
head at run time.
"""

from __future__ import annotations

import json
import shlex
from typing import NotRequired, TypedDict

from spark_llm.config.group import GroupConfig
from spark_llm.plan.deployment import NodePlan, fabric_key_path
from spark_llm.plan.drift import UNVERIFIED, record_token_script
from spark_llm.plan.fabric import FABRIC_SSH_OPTIONS
from spark_llm.plan.scripts import SCRIPTS_DIR
from spark_llm.plan.weights.sync import RSYNC_OPTIONS, heredoc, tool_prelude

# The fan-out program the step ships to the head: its entry point first, then the modules it imports.
FANOUT_FILES = ("fanout.py", "fanout_schedule.py", "fanout_transport.py")


def fanout_sources() -> dict[str, str]:
    """The fan-out program's files by name, as render_fanout ships them."""
    return {name: (SCRIPTS_DIR / name).read_text() for name in FANOUT_FILES}


class FanoutHead(TypedDict):
    name: str
    address: str
    """Its fabric address: where the workers' rsync daemons accept it from."""


class FanoutWorker(TypedDict):
    """A worker as the fan-out reaches it over the fabric (scripts/fanout_transport.Node)."""

    name: str
    address: str
    user: str
    port: int
    host_key: str
    record: str
    """Bash that records the worker's drift token once its copy is verified ($SPARK_LLM_VALUE: the digest)."""
    forget: str
    """Bash that marks its weights unverified before the first byte of a copy reaches it."""


class FanoutPlan(TypedDict):
    """What scripts/fanout.py reads (its plan.json): one writer, `fanout_plan`; one reader, its `Copy`."""

    path: str
    """spark-llm:model.path, on every node."""
    head: FanoutHead
    workers: list[FanoutWorker]
    fabric_key: str
    """The head's fabric key, as a path on the head (`~` expanded there)."""
    ssh_options: list[str]
    streams: int | None
    """spark-llm:transfer.streams (None: the head's cores, at most 4)."""
    transport: str
    """`ssh` (spark-llm:transfer.encrypt) or `rsyncd`."""
    timeout: int
    idle_timeout: int
    rsync_options: list[str]
    restore: NotRequired[str]
    """A rollback's digest: every worker puts back the version it kept instead of copying."""


def fanout_plan(
    cfg: GroupConfig, head: NodePlan, workers: list[NodePlan], tokens: dict[str, str], step: str
) -> FanoutPlan:
    """What scripts/fanout.py reads: the head, every worker (with its record script), streams and transport."""
    return {
        "path": cfg.model.path,
        "head": {"name": head.name, "address": head.fabric_address},
        "workers": [
            {
                "name": w.name,
                "address": w.fabric_address,
                "user": w.ssh.user,
                "port": w.ssh.port,
                "host_key": w.ssh.host_key,
                "record": record_token_script(w.remote_dir, step, tokens[w.name], "$SPARK_LLM_VALUE"),
                "forget": record_token_script(w.remote_dir, step, UNVERIFIED, "-"),
            }
            for w in workers
        ],
        "fabric_key": fabric_key_path(cfg),
        "ssh_options": list(FABRIC_SSH_OPTIONS),
        "streams": cfg.transfer.streams,
        "transport": "ssh" if cfg.transfer.encrypt else "rsyncd",
        "timeout": cfg.timeouts.transfer_seconds,
        "idle_timeout": cfg.timeouts.fabric_idle_seconds,
        # The one rsync option list of every weights copy (the fan-out adds what its streams need).
        "rsync_options": list(RSYNC_OPTIONS),
    }


# What the copy to the workers says when a signal ended it, before its exit (the step's error shows it).
KILLED = (
    "spark-llm: the copy to the workers was killed before it ended",
    "nothing copies now, and no worker serves what arrived (it is not verified). Run `pulumi up` again: the copy"
    " resumes from the files that arrived",
)


def render_fanout(
    cfg: GroupConfig,
    head: NodePlan,
    workers: list[NodePlan],
    tool: str,
    fanout: dict[str, str],
    tokens: dict[str, str],
    step: str,
    restore: str | None = None,
) -> str:
    """On the head: make model.path on every worker identical to the head's; prints the head's digest line last.
    `restore`: a rollback's digest: every worker puts back the version it kept instead (scripts/fanout.py)."""
    planned = fanout_plan(cfg, head, workers, tokens, step)
    if restore:
        planned["restore"] = restore
    plan = json.dumps(planned, indent=1, sort_keys=True)
    log = shlex.quote(f"{head.remote_dir}/logs/weights-fanout.log")
    return (
        "set -euo pipefail\n"
        + tool_prelude(tool)
        + "".join(heredoc(f'"$work/{n}"', text, f"SPARK_LLM_FANOUT_{i}") for i, (n, text) in enumerate(fanout.items()))
        + heredoc('"$work/plan.json"', plan, "SPARK_LLM_FANOUT_PLAN")
        + f'mkdir -p "$(dirname {log})"\n'
        # The head's own lines go to the log too (what a later `spark-llm logs` or a user on the head reads); the
        # last one is the head's `spark-llm-manifest DIGEST FILES BYTES`. The program leads a process group of its
        # own (its pid): when it ends, however (kill -9 unwinds nothing), whatever it started and left is ended
        # with it, so no rsync goes on writing to a worker with nothing to verify it (issue 31, 2).
        + "{\n"
        + '  python3 -u "$work/fanout.py" "$work/plan.json" "$tool" 2>&1 &\n'
        + "  fanout=$!\n"
        + '  code=0; wait "$fanout" || code=$?\n'
        + '  kill -KILL -- "-$fanout" 2>/dev/null || true\n'
        # Killed by a signal (kill -9, the kernel's out-of-memory killer): bash's own word is `Killed`, which says
        # neither what stopped nor what now.
        + '  if [ "$code" -gt 128 ]; then\n'
        + "    # shellcheck disable=SC2016 # the backticks are words for the operator\n"
        + f"    printf '%s (signal %s); %s\\n' {shlex.quote(KILLED[0])} \"$((code - 128))\" {shlex.quote(KILLED[1])}\n"
        + "  fi\n"
        + '  exit "$code"\n'
        + f"}} | tee {log}\n"
    )
