"""`spark-llm status` without nodes: the weights' reading (an ssh probe of every node) is the test's to say."""

from __future__ import annotations

import pytest

from spark_llm.ops.status import command as status


@pytest.fixture(autouse=True)
def weights_as_verified(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What status.weights_drift returns: nothing differs unless a test appends what does."""
    found: list[str] = []
    monkeypatch.setattr(status, "weights_drift", lambda plan: list(found))
    return found
