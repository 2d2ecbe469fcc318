"""The fan-out step's plan and script (tests/integration/test_weights_fanout.py runs them on the sim)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spark_llm import config
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan.fabric import FABRIC_SSH_OPTIONS
from spark_llm.plan.scripts import SCRIPTS_DIR
from spark_llm.plan.weights import steps as weights
from spark_llm.plan.weights.fanout import (
    FanoutHead,
    FanoutPlan,
    FanoutWorker,
    fanout_plan,
    fanout_sources,
    render_fanout,
)
from spark_llm.plan.weights.sync import RSYNC_OPTIONS
from tests.conftest import dual_spark_raw

TOOL = weights.manifest_tool()
FANOUT = fanout_sources()


def build(**transfer):
    raw = dual_spark_raw()
    if transfer:
        raw["transfer"] = transfer
    cfg = groups(config.parse(raw))[0]
    return cfg, plan.build_plan(cfg, plan.LAUNCH_TEMPLATE.read_text())


def test_the_plan_pins_each_workers_host_key_and_names_the_fabric_key_on_the_head():
    cfg, p = build()
    data = fanout_plan(cfg, p.head, list(p.workers), {"spark-2": "tok"}, "weights")
    (worker,) = data["workers"]
    assert worker["address"] == "192.168.200.13" and worker["host_key"].startswith("ssh-ed25519 ")
    assert data["fabric_key"] == cfg.network.fabric_key_path and data["path"] == cfg.model.path
    assert "tok" in worker["record"] and "/home/aurora/spark-llm/state" in worker["record"]
    # Defaults: the head's cores decide the streams; rsync daemons on the fabric; the documented timeout.
    assert data["streams"] is None and data["transport"] == "rsyncd" and data["timeout"] == 21600
    assert data["idle_timeout"] == 60  # rsync's --timeout: a cut link fails the copy after a minute
    assert data["rsync_options"] == list(RSYNC_OPTIONS)  # the one list every weights copy uses


def test_the_fanout_reads_only_keys_its_plan_record_declares_and_the_writer_writes_them_all():
    """One typed record (FanoutPlan), one writer, one reader: a key the program reads that the plan does not write
    (or writes under another name) fails here, as mypy fails it in `make lint`."""
    cfg, p = build()
    written = fanout_plan(cfg, p.head, list(p.workers), {"spark-2": "tok"}, "weights")
    declared = set(FanoutPlan.__annotations__)
    assert set(written) == declared - {"restore"}  # a rollback's alone (render_fanout)
    assert set(written["workers"][0]) == set(FanoutWorker.__annotations__)
    assert set(written["head"]) == set(FanoutHead.__annotations__)
    source = "".join(fanout_sources().values())
    read = set(re.findall(r'plan(?:\.get\(|\[)"(\w+)"', source))
    assert read and read <= declared, read - declared


def test_the_idle_bound_on_the_fabric_is_the_users_choice_within_limits():
    raw = dual_spark_raw()
    raw["timeouts"] = {"fabricIdleSeconds": 20}
    cfg = groups(config.parse(raw))[0]
    p = plan.build_plan(cfg, plan.LAUNCH_TEMPLATE.read_text())
    assert fanout_plan(cfg, p.head, list(p.workers), {"spark-2": "tok"}, "weights")["idle_timeout"] == 20
    raw["timeouts"] = {"fabricIdleSeconds": 2}
    with pytest.raises(config.ConfigError, match=r"spark-llm:timeouts.fabricIdleSeconds"):
        config.parse(raw)


def test_streams_and_encryption_are_the_users_choice():
    cfg, p = build(streams=6, encrypt=True)
    data = fanout_plan(cfg, p.head, list(p.workers), {"spark-2": "tok"}, "weights")
    assert data["streams"] == 6 and data["transport"] == "ssh"


def test_bad_streams_are_refused_naming_the_key():
    raw = dual_spark_raw()
    raw["transfer"] = {"streams": 0}
    try:
        config.parse(raw)
    except config.ConfigError as exc:
        assert "spark-llm:transfer.streams" in str(exc)
    else:
        raise AssertionError("streams: 0 was accepted")


def test_the_script_carries_the_plan_and_runs_the_fanout_with_the_manifest_tool_last():
    cfg, p = build()
    script = render_fanout(cfg, p.head, list(p.workers), TOOL, FANOUT, {"spark-2": "tok"}, "weights")
    plan_json = re.search(r"<<'SPARK_LLM_FANOUT_PLAN'\n(.*?)\nSPARK_LLM_FANOUT_PLAN\n", script, re.S).group(1)
    data = json.loads(plan_json)
    assert data["workers"][0]["name"] == "spark-2"
    # The same pinned-key ssh options as every other head -> worker step (spark_llm.plan.fabric).
    assert data["ssh_options"] == list(FABRIC_SSH_OPTIONS) and "StrictHostKeyChecking=yes" in data["ssh_options"]
    assert 'python3 -u "$work/fanout.py" "$work/plan.json" "$tool"' in script
    # Before the first byte to a worker, its record of verified weights goes (issue 31, 2).
    assert 'printf "%s %s\\n" unverified "-" > /home/aurora/spark-llm/state/weights.tmp' in data["workers"][0]["forget"]


# A fan-out killed outright: it started an rsync (here a `sleep` in its process group, as the real program's children
# are: scripts/fanout.py makes itself a group leader first), then dies of SIGKILL, which unwinds nothing.
KILLED_FANOUT = """import os, subprocess, sys, time
os.setpgid(0, 0)
child = subprocess.Popen(["sleep", "300"])
with open(os.environ["CHILD_PID_FILE"], "w") as f:
    f.write(str(child.pid))
print("fanout: sending", flush=True)
os.kill(os.getpid(), 9)
"""


def test_a_fanout_killed_outright_leaves_no_process_behind(tmp_path):
    """Issue 31, 2: `kill -9` of the head's fan-out at 20% left its rsync running to the end, unverified."""
    import os
    import subprocess

    cfg, p = build()
    fake = {"fanout.py": KILLED_FANOUT, "fanout_transport.py": ""}
    script = render_fanout(cfg, p.head, list(p.workers), TOOL, fake, {"spark-2": "tok"}, "weights")
    script = script.replace("/home/aurora/spark-llm/logs", str(tmp_path))  # the head's log dir, here
    pid_file = tmp_path / "child.pid"
    ran = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env={**os.environ, "CHILD_PID_FILE": str(pid_file)}
    )
    assert ran.returncode == 137, ran.stderr  # the program's own death is the step's failure
    # Said in words, not bash's `Killed` alone (issue 41, 7), in the step's output and the head's log.
    said = "spark-llm: the copy to the workers was killed before it ended (signal 9); nothing copies now"
    assert said in ran.stdout and said in (tmp_path / "weights-fanout.log").read_text()
    assert "fanout: sending" in (tmp_path / "weights-fanout.log").read_text()
    child = int(pid_file.read_text())
    stat = Path(f"/proc/{child}/stat")
    # Gone, or a zombie waiting for its new parent to reap it: not running either way.
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


def test_the_real_fanout_leads_a_process_group_of_its_own_before_it_starts_anything():
    source = (SCRIPTS_DIR / "fanout.py").read_text()
    main = source[source.index("def main(") :]
    assert main.index("os.setpgid(0, 0)") < main.index("Copy(plan, tool, work).run()")
