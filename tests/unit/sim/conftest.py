"""The stand-in group fixtures, shared by the engine tests, the command-line tests and the start-phase tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.unit.sim.standin_group import EngineGroup
from tests.unit.sim.test_standin_vllm import new_vllm_group  # noqa: F401 (a fixture: pytest finds it here)


@pytest.fixture
def new_group(tmp_path: Path) -> Iterator[Callable[..., EngineGroup]]:
    groups: list[EngineGroup] = []

    def make(nnodes: int, **options: object) -> EngineGroup:
        group = EngineGroup(tmp_path, nnodes, **options)
        groups.append(group)
        return group

    yield make
    for group in groups:
        group.stop()
