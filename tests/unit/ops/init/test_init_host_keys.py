"""Host keys at init: the strongest key offered, accepted only by a person or by the fingerprint they checked."""

from __future__ import annotations

import pytest

from spark_llm.ops.init.host_keys import HostKeyError, accept, best_key, describe
from spark_llm.remote.ssh import fingerprint

ED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFGBJAPekFDTDj60+HuK4DwDVxKqw/X8yBqkyYxH0krl"
SCAN = (
    "# 10.0.0.1:22 SSH-2.0-OpenSSH_9.6\n"
    "10.0.0.1 ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ\n"
    f"10.0.0.1 {ED}\n"
    "10.0.0.1 ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY\n"
)


def test_the_strongest_key_offered_is_the_one_pinned():
    assert best_key(SCAN) == ED
    assert best_key("# 10.0.0.1:22 SSH-2.0-OpenSSH_9.6\n") is None  # answered, but no key: not trusted
    assert describe(ED) == f"ED25519 {fingerprint(ED)}"


def test_a_key_is_accepted_by_its_checked_fingerprint():
    assert accept("head", "10.0.0.1:22", ED, [fingerprint(ED)]).endswith("accepted with --accept")


def test_without_a_terminal_or_accept_the_key_is_shown_with_how_to_check_and_accept_it(monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(HostKeyError) as err:
        accept("head", "10.0.0.1:22", ED, ["SHA256:someone-elses"])
    assert str(err.value) == (
        f"head (10.0.0.1:22) presents ED25519 {fingerprint(ED)}; compare it on head's console: `ssh-keygen -lf"
        f" /etc/ssh/ssh_host_ed25519_key.pub`, then run init again with --accept {fingerprint(ED)}"
    )


def test_at_a_terminal_the_person_says_yes_or_nothing_is_trusted():
    asked: list[str] = []
    assert accept("head", "h", ED, [], ask=lambda q: asked.append(q) or "y").endswith("accepted at the terminal")
    assert fingerprint(ED) in asked[0] and asked[0].endswith("[y/N] ")
    with pytest.raises(HostKeyError, match="was not accepted"):
        accept("head", "h", ED, [], ask=lambda q: "")


def test_init_and_the_pinned_key_check_scan_one_way(monkeypatch, tmp_path):
    """`spark-llm init` (every key, the strongest pinned) and the check of a pinned key (its type only) run the one
    ssh-keyscan of spark_llm.remote.runner: from here, or from the head for a worker."""
    from spark_llm.ops.init import host_keys
    from spark_llm.plan.hosts import SshHost
    from spark_llm.remote import runner

    scanned = []

    def keyscan(host, port, via, *, key_type=None, timeout=20):
        scanned.append((host, port, via, key_type))
        return SCAN

    monkeypatch.setattr(runner, "keyscan", keyscan)
    head = SshHost("head", "10.0.0.1", 22, "root", "/k", ED)
    worker = SshHost("worker-1", "10.0.0.2", 2222, "root", "/k", ED, via=head)
    assert host_keys.scan("10.0.0.2", 2222, head) == ED
    assert runner.presented_host_key(worker) == ED
    assert scanned == [("10.0.0.2", 2222, head, None), ("10.0.0.2", 2222, head, "ed25519")]


def test_the_keyscan_from_here_asks_for_the_type_given_and_waits_a_bounded_time(monkeypatch, tmp_path):
    from spark_llm.remote import runner

    fake = tmp_path / "ssh-keyscan"
    fake.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/argv\nprintf "%s\\n" "10.0.0.1 {ED}"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert runner.keyscan("10.0.0.1", 22, None, key_type="ed25519") == f"10.0.0.1 {ED}\n"
    assert (tmp_path / "argv").read_text() == "-T 5 -t ed25519 -p 22 10.0.0.1\n"
    assert runner.keyscan("10.0.0.1", 22, None) == f"10.0.0.1 {ED}\n"
    assert (tmp_path / "argv").read_text() == "-T 5 -p 22 10.0.0.1\n"
