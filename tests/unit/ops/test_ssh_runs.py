"""A node run over ssh (bash standing in for ssh): the clock exchange, a failed ssh returning at once, the kinds
of ssh failure, and host key fingerprints."""

from __future__ import annotations

import subprocess
import time

import pytest

from spark_llm.remote import runner, ssh
from tests.conftest import HEAD_KEY


@pytest.fixture
def local_bash(monkeypatch):
    monkeypatch.setattr(runner, "ssh_argv", lambda _config, _target, remote: remote)


def test_clock_exchange_measures_skew_and_runs_the_script(local_bash, spark_plan):
    run = runner.run(spark_plan.head.ssh, "echo done; cat; echo after", timeout=20, clock=True)
    assert run.ok and run.stdout == "done\nafter\n"  # the script's own commands read nothing from stdin
    # Same clock on both ends: the true skew (0) lies within the exchange's error bound.
    assert run.clock_skew is not None and run.clock_error is not None
    assert abs(run.clock_skew) <= run.clock_error + 0.01


def test_failed_ssh_returns_at_once_not_at_the_timeout(monkeypatch, spark_plan):
    # Regression: the end of the output was consumed by the clock handshake and the rest waited for the deadline.
    monkeypatch.setattr(
        runner, "ssh_argv", lambda *_: ["bash", "-c", "echo 'Host key verification failed.' >&2; exit 255"]
    )
    start = time.monotonic()
    run = runner.run(spark_plan.head.ssh, "true", timeout=30, clock=True)
    assert time.monotonic() - start < 5
    assert run.code == 255 and runner.failure_of(run).kind == "host key mismatch"


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("Host key verification failed.", "host key mismatch"),
        ("root@10.0.0.2: Permission denied (publickey).", "key refused"),
        ("ssh: connect to host 10.0.0.2 port 22: No route to host", "unreachable"),
        ("Connection timed out during banner exchange", "unreachable"),
        ("channel 0: open failed: connect failed: No route to host\nstdio forwarding failed", "unreachable"),
        ("kex_exchange_identification: read: Connection reset by peer", "unreachable"),
        ("something new", "ssh failed"),
    ],
    ids=["mismatch", "refused", "no-route", "banner-timeout", "jump-cannot-reach", "reset", "other"],
)
def test_ssh_failure_kinds(stderr, kind):
    assert ssh.ssh_failure(stderr).kind == kind


def test_fingerprint_matches_ssh_keygen(tmp_path):
    (tmp_path / "key.pub").write_text(HEAD_KEY + "\n")
    keygen = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "key.pub")], capture_output=True, text=True)
    assert ssh.fingerprint(HEAD_KEY) == keygen.stdout.split()[1]
