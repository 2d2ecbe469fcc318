"""The order the integration test files go to the sim workers: the longest first.

Each file runs whole on one pytest-xdist worker (`--dist loadfile`: its tests share its deployment), and a worker
takes the next file when it is free. xdist orders the files by their number of tests by default; a few long files
near the end then left one worker running alone for a minute while the two cores had room (a fresh clone's run:
the workers ended 1443, 1467 and 1524 s in). Longest first (with `--no-loadscope-reorder`, Makefile) leaves the
short files to fill the end.

FILE_SECONDS: each file's seconds on one worker (its tests' setup, call and teardown) from a fresh clone's
`make test CMDLOG=FILE` and `python tools/cmdlog_report.py FILE` (column test_s), 2026-12-07. A file not listed (a
new one) counts as DEFAULT_SECONDS; stale numbers only cost balance, never a test.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

DEFAULT_SECONDS = 100
FILE_SECONDS = {
    "test_router.py": 480,  # 599 at fresh-56; its setup one up shorter since
    "test_rollback.py": 366,
    "test_supervisor.py": 294,
    "test_interrupted_up.py": 272,
    "test_ops.py": 262,
    "test_start_watch.py": 200,
    "test_node_faults.py": 196,
    "test_engines.py": 170,
    "test_weights_fanout.py": 230,  # 164, and test_two_workers.py's and test_engines_three_workers.py's groups
    "test_rollout.py": 215,  # 164, and test_pulumi_lifecycle.py's deployment folded in
    "test_weights.py": 160,
    "test_upgrade.py": 129,
    "test_two_operators.py": 128,
    "test_connections.py": 121,
    "test_fabric.py": 166,
    "test_two_states.py": 108,
    "test_bad_input.py": 107,
    "test_image.py": 170,  # 101, and test_image_layers.py's moves folded in
    "test_two_operators_postgres.py": 94,
    "test_init.py": 85,
    "test_pulumi_lifecycle.py": 5,
    "test_ray_security.py": 78,
    "test_disk_full.py": 70,
    "test_deploy_as_user.py": 64,
    "test_demo.py": 52,
    "test_security.py": 70,  # 35, and test_api_key.py's story folded in
    "test_sim_cluster.py": 27,
    "test_harness_config.py": 13,
    "test_sim_networks.py": 4,
}


def longest_first(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """`items` with whole files longest first; within a file, the order they were collected in."""
    return sorted(items, key=lambda item: -FILE_SECONDS.get(item.path.name, DEFAULT_SECONDS))
