"""The stand-in engine's failure knobs and failures over loopback, with their exit codes: a crash at init, a
crash once, a rank with another model path, a hung rank, a worker killed after formation."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

from tests.unit.sim.standin_group import WAIT_SECONDS, EngineGroup, wait_until


def test_crash_at_init_exits_1_with_a_traceback_and_the_head_never_becomes_healthy(
    new_group: Callable[..., EngineGroup],
) -> None:
    # The head's rendezvous window must outlast the crashing rank's start on a loaded machine: the head is read
    # while it waits (503) before the test turns to the crash, and only then is the timeout awaited.
    group = new_group(3, dist_timeout=10)
    knobs = {"STANDIN_CRASH_AT_INIT": "1"}
    head = group.start(0, env=knobs)
    crashing = group.start(1, env=knobs)
    group.start(2, env=knobs)
    statuses: set[int | None] = set()

    def head_waiting() -> bool:
        statuses.add(head.health())
        return 503 in statuses

    wait_until(head_waiting, "the head to answer 503 while it waits at the rendezvous")
    assert crashing.wait_for_exit() == 1
    log = crashing.log()
    begin = log.index("Init torch distributed begin.")
    assert log.index("Traceback (most recent call last):") > begin
    assert "in init_torch_distributed" in log
    assert "Init torch distributed ends." not in log

    # The head waits at the rendezvous, never healthy, until --dist-timeout ends it.
    deadline = time.monotonic() + WAIT_SECONDS
    while head.process.poll() is None and time.monotonic() < deadline:
        statuses.add(head.health())
        time.sleep(0.1)
    assert head.wait_for_exit() == 1
    assert 200 not in statuses
    assert "Timed out after 10 seconds waiting for clients. 2/3 clients joined. Missing node ranks: [1]" in head.log()


def test_crash_once_file_crashes_the_first_start_only(new_group: Callable[..., EngineGroup], tmp_path: Path) -> None:
    marker = tmp_path / "crashed-once"
    group = new_group(2)
    head = group.start(0)
    first = group.start(1, env={"STANDIN_CRASH_ONCE_FILE": str(marker)})
    assert first.wait_for_exit() == 1
    assert "in init_torch_distributed" in first.log()
    assert marker.exists()

    group.start(1, env={"STANDIN_CRASH_ONCE_FILE": str(marker)})
    wait_until(lambda: head.health() == 200, "the head to become healthy after the restarted worker joined")


def test_crash_while_file_crashes_every_start_until_it_is_removed(
    new_group: Callable[..., EngineGroup], tmp_path: Path
) -> None:
    marker = tmp_path / "standin-crash"
    marker.touch()
    knobs = {"STANDIN_CRASH_WHILE_FILE": str(marker)}
    group = new_group(2)
    head = group.start(0)
    for _ in range(2):  # every start, not only the first
        crashing = group.start(1, env=knobs)
        assert crashing.wait_for_exit() == 1
        assert "STANDIN_CRASH_WHILE_FILE" in crashing.log()
    marker.unlink()
    group.start(1, env=knobs)
    wait_until(lambda: head.health() == 200, "the head to become healthy once the file is gone")


def test_rank_with_a_different_model_path_is_refused(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(2)
    head = group.start(0)
    mismatched = group.start(1, model_path="/models/another-model")
    assert mismatched.wait_for_exit() == 1
    head.wait_for_log("refused node rank 1")
    assert "config digest" in head.log()
    assert "refused node rank 1" in mismatched.log()
    assert head.health() == 503


def test_hung_rank_never_arrives_and_the_head_times_out(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(2, dist_timeout=2)
    knobs = {"STANDIN_HANG_BEFORE_RENDEZVOUS": "1"}
    head = group.start(0, env=knobs)
    hung = group.start(1, env=knobs)
    assert head.wait_for_exit() == 1
    assert "1/2 clients joined. Missing node ranks: [1]" in head.log()
    assert hung.process.poll() is None
    assert hung.health() == 503
    assert "Init torch distributed begin." not in hung.log()


def test_killing_a_worker_after_formation_ends_the_head_naming_the_rank(
    new_group: Callable[..., EngineGroup],
) -> None:
    group = new_group(3)
    head, worker1, worker2 = (group.start(rank) for rank in range(3))
    wait_until(lambda: head.health() == 200, "the group to form")
    worker2.process.send_signal(signal.SIGKILL)
    assert head.wait_for_exit() == 1
    assert "node rank 2" in head.log().split("ready to roll!")[1]
    assert "left the process group" in head.log()
    assert worker1.wait_for_exit() == 1
    assert "rank 0 at 127.0.0.1" in worker1.log()
