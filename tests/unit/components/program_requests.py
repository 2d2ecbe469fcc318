"""Reading the program's RegisterResource requests (tests/unit/graph_mocks.py records them): the resource types
the program graph tests look for, a command's connection, and whether a value is a Pulumi secret."""

from __future__ import annotations

from tests.unit.graph_mocks import SECRET_SIG
from tests.unit.graph_mocks import inputs as _inputs

COMMAND = "command:remote:Command"
LOCAL_COMMAND = "command:local:Command"
REMOTE_IMAGE = "docker:index/remoteImage:RemoteImage"


def _connection(request) -> dict:
    """A command's connection (pulumi-command keeps all of it secret: it carries the private key)."""
    connection = _inputs(request)["connection"]
    assert _is_secret(connection)
    return connection["value"]


def _is_secret(value) -> bool:
    return isinstance(value, dict) and bool(value.get(SECRET_SIG))
