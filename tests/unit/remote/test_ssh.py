"""spark_llm.remote.ssh: what identifies a reusable connection, and ssh's refusal of a host key named by node."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temp dir with a short path: a socket's path holds at most 107 bytes (pytest's tmp_path is too long)."""
    path = Path(tempfile.mkdtemp(prefix="sl-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def control_dir_of_a_process(tmpdir: Path) -> Path:
    code = "from spark_llm.remote import ssh; print(ssh.control_dir())"
    env = dict(os.environ, TMPDIR=str(tmpdir))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return Path(out.stdout.strip())


def test_program_runs_share_the_users_own_control_dir_so_masters_serve_the_next_run(short_tmp):
    """`preview` then `up`: the second run finds the first one's masters (one handshake per node, not two)."""
    first, second = control_dir_of_a_process(short_tmp), control_dir_of_a_process(short_tmp)
    assert first == second == short_tmp / f"spark-llm-masters-{os.getuid()}"
    mode = first.lstat().st_mode
    assert stat.S_ISDIR(mode) and stat.S_IMODE(mode) == 0o700 and first.lstat().st_uid == os.getuid()


@pytest.mark.parametrize("unsafe", ["open to others", "a symlink"])
def test_a_shared_dir_that_others_could_use_is_not_used(short_tmp, unsafe):
    """Anyone who can reach a master's socket runs commands on the node as the operator: such a dir is left alone,
    and the run keeps its masters in a private dir that goes when it exits."""
    shared = short_tmp / f"spark-llm-masters-{os.getuid()}"
    if unsafe == "open to others":
        shared.mkdir(mode=0o777)
        shared.chmod(0o777)
    else:
        (short_tmp / "elsewhere").mkdir(mode=0o700)
        shared.symlink_to(short_tmp / "elsewhere")
    used = control_dir_of_a_process(short_tmp)
    assert used.parent == short_tmp and used.name.startswith("spark-llm-ssh-ctl-")
    assert not used.exists()  # removed when that process exited
    assert not any((short_tmp / "elsewhere").iterdir()) if unsafe == "a symlink" else True


def test_a_replaced_key_file_never_rides_on_the_master_its_predecessor_opened(tmp_path):
    key = tmp_path / "id"
    key.write_text("one")
    host = dataclasses.replace(HEAD, key_path=str(key))
    before = ssh.connection_id(host)
    assert ssh.connection_id(host) == before
    key.unlink()
    key.write_text("two, rotated")
    assert ssh.connection_id(host) != before


def test_a_socket_left_without_its_master_is_removed_before_a_run_rides_on_it(tmp_path):
    """A master that died (its node rebooted, its run killed) leaves its socket: the next run connects afresh."""
    config = tmp_path / "config"
    config.write_text(ssh.ssh_config(HEAD, tmp_path / "known_hosts", tmp_path))
    socket = tmp_path / ssh.connection_id(HEAD)
    socket.touch()
    ssh.check_masters(config, HEAD, tmp_path)
    assert not socket.exists()


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


# ---------- one option list for every ssh ----------

# FABRIC_SSH_OPTIONS as it was before it came from SSH_OPTIONS: its bytes are in the fabric steps' scripts (their
# triggers), so a change here would re-run every image and weights transfer on upgrade.
FABRIC_BEFORE = (
    "IdentitiesOnly=yes",
    "BatchMode=yes",
    "StrictHostKeyChecking=yes",
    "GlobalKnownHostsFile=/dev/null",
    "ConnectTimeout=15",
    "ServerAliveInterval=15",
    "ServerAliveCountMax=4",
)


def test_every_ssh_takes_its_options_from_the_one_list():
    from components.connection import docker_ssh_opts, ssh_command
    from spark_llm.plan.fabric import FABRIC_SSH_OPTIONS
    from spark_llm.plan.hosts import SSH_OPTIONS

    assert FABRIC_SSH_OPTIONS == FABRIC_BEFORE == tuple(f"{k}={v}" for k, v in SSH_OPTIONS)
    config = ssh.ssh_config(WORKER, Path("/kh"))
    for key, value in SSH_OPTIONS:
        assert config.count(f"  {key} {value}\n") == 2  # the worker and its jump host
        assert docker_ssh_opts(HEAD).count(f"{key}={value}") == 1
        assert ssh_command(WORKER).count(f"{key}={value}") == 1  # the head's copy is inside the ProxyCommand
    # Both forms pin the same line: by node name, the key's type and body.
    pin = f"/bin/echo spark-1 {' '.join(HEAD_KEY.split()[:2])}"
    assert f"KnownHostsCommand={pin}" in docker_ssh_opts(HEAD)
    assert ssh.known_hosts(HEAD) == f"spark-1 {' '.join(HEAD_KEY.split()[:2])}\n"


# ---------- the one runner (bash standing in for ssh) ----------


def stand_in(monkeypatch, argv: list[str] | None = None) -> None:
    """Run the script with local bash instead of ssh (or `argv`, an ssh that fails its own way)."""
    from spark_llm.remote import runner

    monkeypatch.setattr(runner, "ssh_argv", lambda _config, _target, remote: argv or remote)


def test_run_script_returns_stdout_and_raises_with_the_last_lines(monkeypatch):
    from spark_llm.remote import runner

    stand_in(monkeypatch)
    assert runner.run_script(HEAD, "echo one; echo noise >&2; echo two\n", timeout=20) == "one\ntwo\n"
    try:
        runner.run_script(HEAD, "echo started; false; echo never\n", timeout=20)
    except ssh.RemoteError as err:
        assert "exit 1: the script failed on the node" in str(err) and str(err).endswith("started")
    else:
        raise AssertionError("a failed script must raise")


def test_run_script_names_the_hop_whose_host_key_ssh_refused(monkeypatch):
    from spark_llm.remote import runner

    stand_in(monkeypatch, ["bash", "-c", f"printf %s {CHANGED.format(name='spark-1')!r} >&2; exit 255"])
    try:
        runner.run_script(WORKER, "true\n", timeout=20)
    except ssh.HostKeyMismatchError as err:
        assert err.node == "spark-1" and "ssh refused spark-1's host key" in str(err)
    else:
        raise AssertionError("a refused host key must raise")


def test_run_streams_lines_and_stops_when_cancelled(monkeypatch):
    import threading
    import time

    from spark_llm.remote import runner

    stand_in(monkeypatch)
    cancel = threading.Event()
    seen: list[str] = []

    def line(text: str) -> None:
        seen.append(text)
        cancel.set()

    start = time.monotonic()
    result = runner.run(HEAD, "echo first; exec sleep 30\n", timeout=None, on_line=line, cancel=cancel)
    assert seen == ["first\n"] and result.code == runner.NO_ANSWER and time.monotonic() - start < 10
    assert runner.run(HEAD, "exec sleep 30\n", timeout=1).stderr == "no answer within 1 s"
