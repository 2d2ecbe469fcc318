"""spark_llm.remote.ssh: what identifies a reusable connection, and ssh's refusal of a host key named by node."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

from spark_llm.plan.hosts import SshHost
from spark_llm.remote import ssh
from tests.conftest import HEAD_KEY, WORKER_KEY

HEAD = SshHost("spark-1", "192.168.100.11", 22, "ubuntu", "/keys/id", HEAD_KEY)
WORKER = SshHost("spark-2", "192.168.200.13", 22, "ubuntu", "/keys/id", WORKER_KEY, via=HEAD)
OTHER_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"


def control_paths(target: SshHost) -> dict[str, str]:
    """Host alias -> ControlPath in the ssh_config written for `target`."""
    text = ssh.ssh_config(target, Path("/kh"), Path("/ctl"))
    blocks = re.findall(r"Host (\S+)\n(.*?)(?=\nHost |\Z)", text, re.S)
    return {name: re.search(r"ControlPath (\S+)", body).group(1) for name, body in blocks}  # type: ignore[union-attr]


def test_a_changed_pin_of_a_node_never_reuses_the_connection_made_under_the_old_pin():
    before = control_paths(WORKER)
    repinned = dataclasses.replace(WORKER, host_key=OTHER_KEY)
    after = control_paths(repinned)
    assert after["spark-2"] != before["spark-2"]
    assert after["spark-1"] == before["spark-1"]  # the head's pin did not change: its master may serve


def test_a_changed_pin_of_the_jump_host_changes_its_workers_connection_too():
    head = dataclasses.replace(HEAD, host_key=OTHER_KEY)
    after = control_paths(dataclasses.replace(WORKER, via=head))
    before = control_paths(WORKER)
    assert after["spark-1"] != before["spark-1"] and after["spark-2"] != before["spark-2"]


def test_the_same_settings_give_the_same_connection_and_a_socket_path_that_fits():
    assert control_paths(WORKER) == control_paths(dataclasses.replace(WORKER))
    dir_ = ssh.control_dir()
    assert dir_ is not None and len(f"{dir_}/{ssh.connection_id(WORKER)}") + 17 <= 107


def test_each_process_has_its_own_control_dir_removed_when_it_exits():
    """No master connection outlives its program run: the next run makes its own handshake."""
    code = "from spark_llm.remote import ssh; print(ssh.control_dir())"
    dirs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()]
    dirs.append(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip())
    assert dirs[0] != dirs[1]
    assert not any(Path(d).exists() for d in dirs)


CHANGED = (
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"
    "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n"
    "Host key for {name} has changed and you have requested strict checking.\n"
    "Host key verification failed.\n"
)


def test_a_refused_host_key_is_named_by_the_hop_that_presented_it():
    assert ssh.host_key_mismatch(WORKER, CHANGED.format(name="spark-2")) == "spark-2"
    # The worker's connection fails in its jump: the head's key is the wrong one.
    assert ssh.host_key_mismatch(WORKER, CHANGED.format(name="spark-1")) == "spark-1"
    no_type = "No ED25519 host key is known for spark-1 and you have requested strict checking.\n"
    assert ssh.host_key_mismatch(HEAD, no_type + "Host key verification failed.\n") == "spark-1"
    refused = "ssh: connect to host 192.168.100.11 port 22: Connection refused"
    assert ssh.host_key_mismatch(HEAD, refused) is None


def test_a_killed_runs_empty_control_dir_is_swept_and_nothing_else(tmp_path):
    """A run killed before its exit handler leaves an empty dir; the next run removes it once it is old."""
    names = ("abcd1234", "efgh5678", "ijkl9012", "0")
    stale, live, fresh, shared = (tmp_path / f"spark-llm-ssh-ctl-{n}" for n in names)
    for d in (stale, live, fresh, shared):
        d.mkdir()
    (live / "socket").touch()
    for d in (stale, live, shared):
        os.utime(d, (1, 1))
    ssh.remove_stale_control_dirs(tmp_path)
    assert not stale.exists()
    assert live.exists() and fresh.exists() and shared.exists()
