"""The dual-spark stack registered under Pulumi mocks, for the component graph tests of this folder."""

from __future__ import annotations

import pytest

from tests.unit.graph_mocks import dual_spark_stack_file, pinned
from tests.unit.graph_mocks import register as _register


@pytest.fixture
def registered(monkeypatch):
    """Pulumi.dual-spark.yaml as committed (image transferred from the head), host keys pinned."""
    return _register(monkeypatch, pinned(dual_spark_stack_file()))


@pytest.fixture
def registered_present(monkeypatch):
    """The dual-spark stack with the image already on every node."""
    raw = pinned(dual_spark_stack_file())
    raw["image"] = dict(raw["image"], mode="present")
    return _register(monkeypatch, raw)
