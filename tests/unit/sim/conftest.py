"""The stand-in group fixture, shared by the engine tests and the command-line tests of this folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.unit.sim.standin_group import EngineGroup


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
