"""The memory admission step's entry point: `python -m spark_llm.ops.admission`, one node's spec as JSON on stdin.

Run by a pulumi-command `local.Command` per node (components/memory_admission.py) that every stop step of the group
waits for, with the stop steps' triggers and a token new at every run that stops the group: it runs whenever
`pulumi up` is about to restart the group, and a node that cannot fit fails `up` before any member stops (the old
group keeps serving). The verdict is spark_llm.plan.memory's; the reading is the node's own /proc/meminfo and
nvidia-smi, over ssh (read-only); a node that passes records the token it passed with (what the next run's token
is while nothing stops: a no-op `up` runs no admission).
"""

from __future__ import annotations

import sys

from spark_llm.group.memory import INFO_SECTION
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.memory import judge_spec, parse_spec, probe_command, record_script
from spark_llm.plan.observation import parse_probe
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import RemoteError


def main() -> int:
    """Print the node's verdict; exit 1 when it is refused or could not be read."""
    spec = parse_spec(sys.stdin.read())
    host = SshHost.from_props(spec["connection"])
    try:
        out = run_script(host, probe_command(spec["model_path"]), timeout=60)
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
    try:
        run_script(host, record_script(spec), timeout=60)
    except RemoteError as err:
        # Not recorded: the next `up` that stops nothing judges this node once more (its token is not the one
        # the state has), which is all it costs.
        print(f"spark-llm: the admission of {spec['node']} was not recorded there: {err.one_line()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
