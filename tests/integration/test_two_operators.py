"""Two operators run `pulumi up` on the same stack at once, on Pulumi's default file backend (issue 10, item 2)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Pulumi, SimCluster
from tests.integration.two_operators import second_up_is_refused_then_retried

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi) -> Iterator[Pulumi]:
    pulumi.up()
    yield pulumi


def stack_locks(pulumi: Pulumi) -> list[Path]:
    """The file backend's lock files of the stack (`.pulumi/locks/<org>/<project>/<stack>/*.json`)."""
    backend = Path(pulumi.env["PULUMI_BACKEND_URL"].removeprefix("file://"))
    return sorted((backend / ".pulumi" / "locks").glob("**/sim/*.json"))


def test_a_second_up_while_one_runs_is_refused_with_the_lock_and_changes_nothing(
    deployed: Pulumi, sim_cluster: SimCluster, tmp_path: Path
):
    """As the second of two operators sharing a stack, my `pulumi up` during a colleague's is refused at once with
    Pulumi's lock message and changes nothing; theirs completes and serves; mine succeeds when I retry after."""
    seen = second_up_is_refused_then_retried(deployed, sim_cluster, tmp_path, lambda: bool(stack_locks(deployed)))
    print(f"file backend: {seen.summary()}")
