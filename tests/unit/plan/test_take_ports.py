"""A new engine group first removes another spark-llm engine that holds its ports on its nodes: a model renamed
(other than the first) is a new group on the old model's ports, which Pulumi deletes only after the new one started,
so every `up` of a rename failed with "Address already in use" (issue 40)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from components.commands import bash_stdin
from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import container
from spark_llm.plan import deployment as plan
from tests.conftest import dual_spark_raw

# A docker that knows five engine containers by ID: their names and command lines; `rm -f ID` is recorded. The
# script runs in the strict mode the step runs in (components.commands.bash_stdin).
FAKE_DOCKER = r"""#!/bin/bash
case "$1" in
  ps) printf '%s\n' own renamed-away gone-meanwhile other-model worker-of-old ;;
  inspect)
    # Another group's container replaced between the listing and its reading (the groups' steps run at once).
    if [ "$4" = gone-meanwhile ]; then echo "Error: No such object: $4" >&2; exit 1; fi
    case "$3|$4" in
      "{{.Name}}|own") echo /spark-llm-engine ;;
      "{{.Name}}|renamed-away") echo /spark-llm-engine-small ;;
      "{{.Name}}|other-model") echo /spark-llm-engine-embed ;;
      "{{.Name}}|worker-of-old") echo /spark-llm-engine-old ;;
      *"|own") echo "/spark-llm/launch.sh run spark-1 python3 -m sglang.launch_server --port 30000" ;;
      *"|renamed-away") echo "/spark-llm/launch.sh run spark-1 python3 -m sglang.launch_server --port 30000" ;;
      *"|other-model") echo "/spark-llm/launch.sh run spark-1 vllm serve /m --port 30001 --x 300001" ;;
      *"|worker-of-old") echo "/spark-llm/launch.sh run spark-1 sglang --dist-init-addr 192.168.200.12:20000" ;;
    esac ;;
  stop) ;;
  rm) echo "$3" >> "$REMOVED" ;;
esac
"""


def test_the_first_step_removes_the_engines_of_a_model_no_longer_listed_on_its_ports_and_keeps_the_others(
    tmp_path: Path,
) -> None:
    deployment = plan.build_plan(groups(parse(dual_spark_raw()))[0], plan.LAUNCH_TEMPLATE.read_text())
    assert (deployment.port, deployment.dist_port, deployment.container) == (30000, 20000, "spark-llm-engine")
    (tmp_path / "docker").write_text(FAKE_DOCKER)
    (tmp_path / "docker").chmod(0o755)
    removed = tmp_path / "removed"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "REMOVED": str(removed)}
    script = container.take_ports_script(deployment, deployment.head)
    out = subprocess.run(["bash", "-c", bash_stdin(script)], env=env, capture_output=True, text=True, check=True).stdout
    # Its own container is the group's own stop step's; another model's on other ports stays.
    assert removed.read_text().split() == ["renamed-away", "worker-of-old"]
    assert out.splitlines() == [
        "removed spark-llm-engine-small on spark-1: the engine of a model the stack no longer lists, on port 30000,"
        " which this model takes",
        "removed spark-llm-engine-old on spark-1: the engine of a model the stack no longer lists, on port 20000,"
        " which this model takes",
    ]


def test_with_no_other_engine_on_its_ports_the_step_says_so_and_removes_nothing(tmp_path: Path) -> None:
    deployment = plan.build_plan(groups(parse(dual_spark_raw()))[0], plan.LAUNCH_TEMPLATE.read_text())
    (tmp_path / "docker").write_text('#!/bin/bash\n[ "$1" = ps ] && exit 0\nexit 1\n')
    (tmp_path / "docker").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    script = container.take_ports_script(deployment, deployment.head)
    out = subprocess.run(["bash", "-c", bash_stdin(script)], env=env, capture_output=True, text=True, check=True).stdout
    assert out == "no other engine holds port(s) 30000 20000 on spark-1\n"
