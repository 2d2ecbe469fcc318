"""The memory admission step's entry point: `python -m spark_llm.ops.admission`, one node's spec as JSON on stdin.

Run by a pulumi-command `local.Command` per node (components/memory_admission.py) that every stop step of the group
waits for, with the stop steps' triggers: it runs exactly when `pulumi up` is about to restart the group, and a
node that cannot fit fails `up` before any member stops (the old group keeps serving). The verdict is
spark_llm.plan.memory's; the reading is the node's own /proc/meminfo and nvidia-smi, over ssh (read-only).
"""

from __future__ import annotations

import sys

from spark_llm.group.memory import INFO_SECTION
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.memory import judge_spec, parse_spec, probe_command
from spark_llm.plan.observation import parse_probe
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import RemoteError


def main() -> int:
    """Print the node's verdict; exit 1 when it is refused or could not be read."""
    spec = parse_spec(sys.stdin.read())
    try:
        out = run_script(SshHost.from_props(spec["connection"]), probe_command(spec["model_path"]), timeout=60)
        sections = parse_probe(spec["node"], out).facts
    except RemoteError as err:
        sections = {INFO_SECTION: "!" + err.one_line()}
    admission = judge_spec(spec, sections)
    if admission.blocks:
        sys.stderr.write(
            admission.line() + "\nspark-llm: nothing was stopped: the group that runs keeps serving."
            " Fix the above, then `pulumi up` again.\n"
        )
        return 1
    print(admission.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
