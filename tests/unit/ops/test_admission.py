"""The memory admission step (`python -m spark_llm.ops.admission`) on a node it cannot reach: one clear line that
names the node and fails the step (nothing stops after it), never a traceback and never "fits"."""

from __future__ import annotations

import subprocess
import sys

from spark_llm.plan import memory


def test_a_node_that_cannot_be_read_fails_the_step_with_one_line_naming_it(spark_plan):
    spec = memory.admission_spec(spark_plan, spark_plan.head)
    # Nothing listens on port 1 of this machine: ssh fails at once, as for a node that is down.
    spec["connection"] = {**spec["connection"], "host": "127.0.0.1", "port": 1, "via": None}
    done = subprocess.run(
        [sys.executable, "-m", "spark_llm.ops.admission"],
        input=memory.spec_text(spec),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    first = done.stderr.splitlines()[0]
    assert first.startswith("memory admission spark-1: unread: cannot read its memory: spark-1"), done.stderr
    assert "Connection refused; fix: make the node readable over ssh" in first and "Traceback" not in done.stderr
    assert "nothing was stopped: the group that runs keeps serving" in done.stderr
