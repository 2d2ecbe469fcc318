"""The order the integration test files go to the sim workers: the longest first.

Each file runs whole on one pytest-xdist worker (`--dist loadfile`: its tests share its deployment), and a worker
takes the next file when it is free. xdist orders the files by their number of tests by default; a few long files
near the end then left one worker running alone for a minute while the two cores had room (a fresh clone's run:
the workers ended 1443, 1467 and 1524 s in). Longest first (with `--no-loadscope-reorder`, Makefile) leaves the
short files to fill the end.

FILE_SECONDS: each file's seconds on one worker (its tests' setup, call and teardown) from a fresh clone's
`make test CMDLOG=FILE` and `python tools/cmdlog_report.py FILE` (column test_s), fresh-58, 2026-12-08. A file not
listed (a new one) counts as DEFAULT_SECONDS; stale numbers only cost balance, never a test.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

DEFAULT_SECONDS = 100
FILE_SECONDS = {
    "test_router.py": 546,
    "test_rollback.py": 410,
    "test_supervisor.py": 328,
    "test_interrupted_up.py": 282,
    "test_ops.py": 254,
    "test_weights_fanout.py": 210,
    "test_rollout.py": 202,
    "test_start_watch.py": 202,
    "test_node_faults.py": 187,
    "test_image.py": 168,
    "test_weights.py": 158,
    "test_fabric.py": 137,
    "test_upgrade.py": 131,
    "test_engines.py": 124,
    "test_two_operators.py": 123,
    "test_connections.py": 102,
    "test_ray_security.py": 100,
    "test_two_operators_postgres.py": 97,
    "test_two_states.py": 96,
    "test_security.py": 83,
    "test_bad_input.py": 79,
    "test_init.py": 78,
    "test_disk_full.py": 53,
    "test_deploy_as_user.py": 48,
    "test_demo.py": 41,
    "test_sim_cluster.py": 22,
    "test_sim_networks.py": 14,
    "test_pulumi_lifecycle.py": 7,
    "test_harness_config.py": 6,
}


def longest_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """`items` with whole files longest first; within a file, the order they were collected in."""
    return sorted(items, key=lambda item: -FILE_SECONDS.get(item.path.name, DEFAULT_SECONDS))
