"""The readiness gate's entry point: `python -m spark_llm.ops.readiness_gate`, the spec as JSON on stdin (the API key
must not be on a command line).

Run by the readiness gate, a pulumi-command `local.Command` (components/engine_group.py): its output streams into
`pulumi up`, and a failure's message (this process's stderr) becomes the step's error. The watching is
spark_llm.remote.readiness's; after a failed start, the way back (spark_llm.ops.after_failure: the rollback
command, or the rollback itself) is the CLI's.
"""

from __future__ import annotations

import json
import sys

from spark_llm.ops.after_failure import after_failure
from spark_llm.plan.readiness import parse_spec
from spark_llm.plan.start.timeline import TIMELINE_PREFIX, timeline_lines
from spark_llm.remote.readiness import GroupNotReadyError, wait_ready
from spark_llm.remote.ssh import RemoteError


def main() -> int:
    """Watch the start until rank 0 serves; print the timeline, or fail with what went wrong and the way back."""
    spec = parse_spec(sys.stdin.read())

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        timeline = wait_ready(spec, say=say)
        for line in timeline_lines(timeline, title="this start"):
            say(line)
        # For the `start_timeline` output, not for people: `pulumi up` shows this step's stdout only.
        sys.stderr.write(TIMELINE_PREFIX + json.dumps(timeline, sort_keys=True) + "\n")
    except (GroupNotReadyError, RemoteError) as err:
        # A failed start (not a node this machine cannot reach): then the way back to the revision that served before
        # (spark-llm:rollout.onFailure).
        after = (
            after_failure(spec["rollout"], spec["model"], served_before=err.served_before)
            if isinstance(err, GroupNotReadyError)
            else ""
        )
        sys.stderr.write(f"{err}\n{after}\n")
        return 1
    except Exception as err:  # noqa: BLE001 - a bug of ours: one line for `pulumi up`, not a traceback
        sys.stderr.write(f"spark-llm readiness gate failed: {type(err).__name__}: {err}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
