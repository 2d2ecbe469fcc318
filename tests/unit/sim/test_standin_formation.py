"""The stand-in engine's group formation over loopback: /health turns 200 only once the last rank joins, workers
retry until the head listens, a worker that never reaches rank 0 times out."""

from __future__ import annotations

from collections.abc import Callable

from tests.unit.sim.standin_group import EngineGroup, http_get, wait_until


def test_health_is_503_until_the_last_rank_joins_then_200(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(3)
    head = group.start(0)
    worker1 = group.start(1)
    head.wait_for_log("node rank 1 joined")
    assert head.health() == 503
    assert worker1.health() == 503
    assert http_get(f"{head.url}/health_generate")[0] == 503

    worker2 = group.start(2)
    wait_until(lambda: head.health() == 200, "the head's /health to turn 200")
    assert http_get(f"{head.url}/health_generate")[0] == 200
    wait_until(lambda: worker1.health() == 200 and worker2.health() == 200, "the workers' /health to turn 200")
    head.wait_for_log("The server is fired up and ready to roll!")
    assert "Init torch distributed begin." in worker2.log()
    assert "Init torch distributed ends." in worker2.log()


def test_workers_retry_until_a_slow_head_listens(new_group: Callable[..., EngineGroup]) -> None:
    group = new_group(2)
    worker = group.start(1)
    head = group.start(0, env={"STANDIN_SLOW_START_SECONDS": "1.5"})
    worker.wait_for_log("The client socket has failed to connect")
    wait_until(lambda: head.health() == 200, "the slow head to become healthy")
    assert "STANDIN_SLOW_START_SECONDS" in head.log()


def test_worker_that_never_reaches_rank_0_times_out(new_group: Callable[..., EngineGroup]) -> None:
    worker = new_group(2, dist_timeout=2).start(1)
    assert worker.wait_for_exit() == 1
    assert "The client socket has timed out after 2s" in worker.log()
