"""The feed of spark_llm.ssh: a command here streamed into a remote script's stdin (docker save -> docker load)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from spark_llm.ssh import _Feed


def _receiver(into: Path) -> subprocess.Popen[bytes]:
    """Stands in for the ssh process: writes what the remote `docker load` would read to `into`."""
    return subprocess.Popen(["sh", "-c", 'cat > "$0"', str(into)], stdin=subprocess.PIPE)


def test_feed_streams_every_byte_and_reports_the_total(tmp_path):
    receiver, reports = _receiver(tmp_path / "got"), []
    assert receiver.stdin is not None
    feed = _Feed(["head", "-c", "3000000", "/dev/zero"], receiver.stdin, reports.append)
    feed.start()
    feed.finish(kill=False)  # the feed closes the receiver's stdin when its command ends
    assert receiver.wait(timeout=30) == 0
    assert feed.error is None and (tmp_path / "got").stat().st_size == 3_000_000
    assert reports[-1].startswith("sent 3000000 bytes from this machine in ")


def test_feed_that_fails_here_says_which_command_and_why(tmp_path):
    receiver, reports = _receiver(tmp_path / "got"), []
    assert receiver.stdin is not None
    feed = _Feed(["sh", "-c", "echo 'No such image: x' >&2; exit 1"], receiver.stdin, reports.append)
    feed.start()
    feed.finish(kill=False)
    receiver.wait(timeout=30)
    assert feed.error is not None and "exited 1 on this machine: No such image: x" in feed.error
    assert reports == []


def test_feed_stops_when_the_node_stops_reading():
    receiver = subprocess.Popen(["true"], stdin=subprocess.PIPE)
    receiver.wait()
    assert receiver.stdin is not None
    feed = _Feed(["cat", "/dev/zero"], receiver.stdin, lambda _: None)
    feed.start()
    feed.finish(kill=False)
    assert feed.error is not None and "stopped reading" in feed.error


def test_feed_starts_once(tmp_path):
    receiver = _receiver(tmp_path / "got")
    assert receiver.stdin is not None
    feed = _Feed(["printf", "x"], receiver.stdin, lambda _: None)
    feed.start()
    feed.start()
    feed.finish(kill=False)
    receiver.wait(timeout=30)
    assert (tmp_path / "got").read_bytes() == b"x"
