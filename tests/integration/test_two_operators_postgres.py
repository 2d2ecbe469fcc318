"""Two operators share one cluster's stack in PostgreSQL (Pulumi's DIY `postgres://` backend; issue 10, item 2).

A real PostgreSQL server from Debian's package, private to this module (loopback, random port and password).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Pulumi, SimCluster, complete, sim_stack
from tests.integration.postgres_server import PostgresServer, postgres_server
from tests.integration.two_operators import second_up_is_refused_then_retried

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="module")
def pulumi(
    sim_cluster: SimCluster, postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pulumi]:
    """The sim stack with its state in PostgreSQL: the URL in PULUMI_BACKEND_URL, the password in PGPASSWORD."""
    env = dict(os.environ, PULUMI_BACKEND_URL=postgres.url, **postgres.env)
    with sim_stack(env, tmp_path_factory.mktemp("pulumi-config")) as cli:
        yield cli


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi) -> Iterator[Pulumi]:
    pulumi.up()
    yield pulumi


def test_the_stack_lives_in_postgres_and_serves(deployed: Pulumi, postgres: PostgresServer):
    """As a team, we keep the cluster's stack in our PostgreSQL: the checkpoint is a row there, the stack serves."""
    keys = postgres.query("SELECT key FROM pulumi_state ORDER BY key").splitlines()
    assert any(key.endswith("/sim.json") for key in keys), keys
    row = json.loads(postgres.query("SELECT data FROM pulumi_state WHERE key LIKE '%/stacks/%/sim.json'"))
    checkpoint = json.loads(base64.b64decode(row["data"]))  # the backend keeps each file base64 in a JSON column
    assert any(r["type"] == "docker:index/container:Container" for r in checkpoint["checkpoint"]["latest"]["resources"])
    assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4


def test_a_second_up_while_one_runs_is_refused_with_the_lock_and_changes_nothing(
    deployed: Pulumi, sim_cluster: SimCluster, postgres: PostgresServer, tmp_path: Path
):
    """As the second of two operators sharing the stack in PostgreSQL, my `pulumi up` during a colleague's is refused
    with Pulumi's lock message and changes nothing; theirs completes and serves; mine succeeds when I retry after."""

    def stack_locked() -> bool:
        return postgres.query("SELECT count(*) FROM pulumi_state WHERE key LIKE '%.pulumi/locks/%'") != "0"

    seen = second_up_is_refused_then_retried(deployed, sim_cluster, tmp_path, stack_locked)
    # The lock's holder is named by a URL with the user masked, and the password is nowhere.
    assert f"postgres://****:****@127.0.0.1:{postgres.port}/" in seen.refused_output, seen.refused_output
    assert postgres.password not in seen.refused_output
    print(f"postgres: {seen.summary()}")
