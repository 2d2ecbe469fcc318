"""spark_llm.plan.supervisor_key: the supervisor's own key, made on the head and allowed on each worker only through
scripts/supervisor_allow.sh. The step scripts run here in bash, in a temp home, as they run on a node."""

from __future__ import annotations

import dataclasses
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment, supervisor_key

TEMPLATE = deployment.LAUNCH_TEMPLATE.read_text()
PUBLIC = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ8ubTOjcX7oJjU6QEukYY0a7raHmteTa86O1fRoFJJN spark-llm-supervisor@prod"
TOKEN = "repair-0123456789ab"
OTHER_KEYS = "ssh-ed25519 AAAAoperator me@laptop\nssh-ed25519 AAAAfabric root@spark-1"  # no final newline


def plan_of(raw, home: Path | None = None):
    """The plan, with every node's remote dir under `home` (a temp dir) when given."""
    raw["supervisor"] = {"enabled": True}
    plan = deployment.build_plan(groups(parse(raw))[0], TEMPLATE)
    if home is None:
        return plan
    nodes = tuple(dataclasses.replace(n, remote_dir=str(home / "spark-llm")) for n in plan.nodes)
    return dataclasses.replace(plan, nodes=nodes)


def run_step(script: str, home: Path, phase: str | None = None) -> subprocess.CompletedProcess:
    """A step's script as NodeCommand runs it (strict mode, $SPARK_LLM_PHASE at delete), in `home`."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    if phase:
        env["SPARK_LLM_PHASE"] = phase
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script], env=env, capture_output=True, text=True, timeout=60
    )


def test_the_workers_line_forces_the_allow_script_on_the_engines_container_with_restrict(raw_config):
    plan = plan_of(raw_config)
    line = supervisor_key.authorized_line(plan, plan.workers[0], PUBLIC + "\n")
    assert line == ('restrict,command="/home/aurora/spark-llm/supervisor-allow.sh spark-llm-engine" ' + PUBLIC), line


def test_the_line_names_the_container_the_stack_configures(raw_config):
    raw_config["engine"] = {"containerName": "my-engine"}
    plan = plan_of(raw_config)
    assert 'supervisor-allow.sh my-engine" ssh-ed25519' in supervisor_key.authorized_line(plan, plan.workers[0], PUBLIC)


@pytest.mark.parametrize("printed", ["", "-----BEGIN OPENSSH PRIVATE KEY-----", "ssh-rsa AAAAB3Nza x@y", "ssh-ed25519"])
def test_a_key_step_that_printed_no_ed25519_public_key_authorizes_nothing(raw_config, printed):
    plan = plan_of(raw_config)
    with pytest.raises(ValueError, match="printed no ed25519 public key"):
        supervisor_key.authorized_line(plan, plan.workers[0], printed)


def test_the_key_is_made_on_the_head_in_a_0700_dir_0600_and_only_its_public_line_is_printed(raw_config, tmp_path):
    if not shutil.which("ssh-keygen"):
        pytest.skip("no ssh-keygen here")
    plan = plan_of(raw_config, tmp_path)
    script = supervisor_key.keygen_script(plan, "prod")
    made = run_step(script, tmp_path)
    assert made.returncode == 0, made.stderr
    key = Path(supervisor_key.key_path(plan.head))
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700 and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert made.stdout == Path(f"{key}.pub").read_text()
    assert made.stdout.startswith("ssh-ed25519 ") and made.stdout.endswith(" spark-llm-supervisor@prod\n")
    assert made.stderr == "" and "PRIVATE" not in made.stdout
    # The line the workers get is made of what the step printed.
    assert supervisor_key.authorized_line(plan, plan.workers[0], made.stdout).endswith(made.stdout.strip())
    # A connection update prints the same line again; a new state's step makes a new key over the old one.
    update = run_step(supervisor_key.public_key_command(plan), tmp_path)
    assert update.stdout == made.stdout
    again = run_step(script, tmp_path)
    assert again.returncode == 0 and again.stdout != made.stdout
    assert run_step(supervisor_key.remove_key_command(plan), tmp_path).returncode == 0
    assert not key.parent.exists()


def test_the_private_key_is_in_no_step_input(raw_config):
    plan = plan_of(raw_config)
    for text in (
        supervisor_key.keygen_script(plan, "prod"),
        supervisor_key.public_key_command(plan),
        supervisor_key.remove_key_command(plan),
    ):
        assert "PRIVATE KEY" not in text
    assert "cat /home/aurora/spark-llm/supervisor-key/id_ed25519.pub" == supervisor_key.public_key_command(plan)


def test_the_workers_step_adds_its_line_once_beside_the_other_keys_and_installs_the_allow_script(raw_config, tmp_path):
    plan = plan_of(raw_config, tmp_path)
    worker = plan.workers[0]
    (tmp_path / ".ssh").mkdir(mode=0o700)
    keys = tmp_path / ".ssh" / "authorized_keys"
    keys.write_text(OTHER_KEYS)
    keys.chmod(0o600)
    script = supervisor_key.authorize_script(plan, worker, PUBLIC, TOKEN)
    for _ in range(2):  # a second run (an `up` that re-runs it) adds nothing
        done = run_step(script, tmp_path)
        assert done.returncode == 0, done.stderr
    line = supervisor_key.authorized_line(plan, worker, PUBLIC)
    assert keys.read_text() == OTHER_KEYS + "\n" + line + "\n"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    allow = Path(supervisor_key.allow_path(worker))
    assert allow.read_text() == supervisor_key.ALLOW_SCRIPT.read_text()
    assert stat.S_IMODE(allow.stat().st_mode) == 0o755


def test_the_workers_step_makes_ssh_dir_and_file_private_when_there_are_none(raw_config, tmp_path):
    plan = plan_of(raw_config, tmp_path)
    done = run_step(supervisor_key.authorize_script(plan, plan.workers[0], PUBLIC, TOKEN), tmp_path)
    assert done.returncode == 0, done.stderr
    keys = tmp_path / ".ssh" / "authorized_keys"
    assert stat.S_IMODE(keys.parent.stat().st_mode) == 0o700 and stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert keys.read_text().count("\n") == 1


def test_its_delete_removes_only_its_line_and_the_script(raw_config, tmp_path):
    plan = plan_of(raw_config, tmp_path)
    worker = plan.workers[0]
    (tmp_path / ".ssh").mkdir(mode=0o700)
    keys = tmp_path / ".ssh" / "authorized_keys"
    # Another stack's supervisor key, the same key without the restriction: neither is this step's line.
    others = f"{OTHER_KEYS}\n{PUBLIC.replace('prod', 'other')}\n{PUBLIC}\n"
    keys.write_text(others)
    keys.chmod(0o640)
    script = supervisor_key.authorize_script(plan, worker, PUBLIC, TOKEN)
    assert run_step(script, tmp_path).returncode == 0
    deleted = run_step(script, tmp_path, phase=supervisor_key.DELETE_PHASE)
    assert deleted.returncode == 0, deleted.stderr
    assert keys.read_text() == others
    assert stat.S_IMODE(keys.stat().st_mode) == 0o640  # the file's own mode kept
    assert not Path(supervisor_key.allow_path(worker)).exists()
    assert not (tmp_path / "spark-llm" / "state" / supervisor_key.STEP).exists()  # its drift token goes too
    assert not list(keys.parent.glob(".spark-llm.*"))
    # A delete with nothing left to remove (a node set up again by hand) succeeds.
    again = run_step(script, tmp_path, phase=supervisor_key.DELETE_PHASE)
    assert again.returncode == 0 and keys.read_text() == others


def test_its_delete_edits_the_file_a_link_points_to(raw_config, tmp_path):
    plan = plan_of(raw_config, tmp_path)
    (tmp_path / ".ssh").mkdir(mode=0o700)
    real = tmp_path / "keys"
    real.write_text(OTHER_KEYS + "\n")
    (tmp_path / ".ssh" / "authorized_keys").symlink_to(real)
    script = supervisor_key.authorize_script(plan, plan.workers[0], PUBLIC, TOKEN)
    assert run_step(script, tmp_path).returncode == 0
    assert run_step(script, tmp_path, phase=supervisor_key.DELETE_PHASE).returncode == 0
    assert (tmp_path / ".ssh" / "authorized_keys").is_symlink() and real.read_text() == OTHER_KEYS + "\n"


def probed(plan, node, home: Path) -> str:
    """The live value the worker's probe section prints."""
    out = run_step(supervisor_key.probe(plan, node), home)
    assert out.returncode == 0, out.stderr
    section, _, value = out.stdout.strip().partition("\t")
    assert section == supervisor_key.PROBE_SECTION
    return value


@pytest.mark.parametrize(
    "change",
    [
        "sed -i '/spark-llm-supervisor@prod/d' .ssh/authorized_keys",  # the line removed (ssh-copy-id, a new image)
        "sed -i 's/restrict,//' .ssh/authorized_keys",  # the line's restriction taken off
        "echo 'exec bash' >> spark-llm/supervisor-allow.sh",  # the allow script edited
        "rm spark-llm/supervisor-allow.sh",
    ],
)
def test_the_probe_reads_back_what_the_step_recorded_until_the_line_or_script_is_changed(raw_config, tmp_path, change):
    plan = plan_of(raw_config, tmp_path)
    worker = plan.workers[0]
    assert run_step(supervisor_key.authorize_script(plan, worker, PUBLIC, TOKEN), tmp_path).returncode == 0
    token, _, value = (tmp_path / "spark-llm" / "state" / supervisor_key.STEP).read_text().strip().partition(" ")
    assert token == TOKEN and probed(plan, worker, tmp_path) == value
    assert subprocess.run(["bash", "-c", change], cwd=tmp_path, timeout=30).returncode == 0
    assert probed(plan, worker, tmp_path) != value


def test_only_the_workers_of_a_supervised_stack_are_probed_for_the_key(raw_config):
    plan = plan_of(raw_config)
    assert supervisor_key.probe(plan, plan.head) == ""
    assert supervisor_key.PROBE_SECTION in supervisor_key.probe(plan, plan.workers[0])
    raw_config["supervisor"] = {"enabled": False}
    off = deployment.build_plan(groups(parse(raw_config))[0], TEMPLATE)
    assert supervisor_key.probe(off, off.workers[0]) == ""
