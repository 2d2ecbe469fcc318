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
