"""The supervisor's records that cross to the head: its spec (written by `pulumi up`, read by the program) and its
state (written by the program, read by `spark-llm status` and `pulumi preview`). One type each, so mypy follows a
key from its writer to its reader; `dumps` is the one way either is written.
"""

from __future__ import annotations

import json
from typing import NotRequired, TypedDict

from spark_llm.group.memory import MemorySpec

IN_PROGRESS = "in progress"
"""A restart's result while it runs: the supervisor writes it before it stops anything."""


class Budget(TypedDict):
    """spark-llm:supervisor's restart budget (spark_llm.config.supervisor), as the spec carries it."""

    max_restarts: int
    window_seconds: float
    backoff_seconds: float


class SpecMember(TypedDict):
    """A member in rank order, as the supervisor reaches it."""

    name: str
    role: str
    address: str
    """Its fabric address (the head reaches the workers over the fabric)."""
    user: str
    port: int
    container_id: str
    """Its engine container as `pulumi up` created it: another container there is not this deployment's."""


class RouterSpec(TypedDict):
    """The router on the head (spark-llm:router), as the supervisor keeps it up: the container `pulumi up` made, and
    how to make it again (spark_llm.plan.router)."""

    container: str
    create: dict
    """The body of Docker's `POST /containers/create` for the router: image, command, environment, labels, host
    network, the files mounted read-only, restart policy."""
    grace_seconds: float
    """How long it must be gone or stopped before the supervisor acts (`pulumi up` replaces it within seconds)."""


class TokenSignal(TypedDict):
    """With spark-llm:monitoring: rank 0's own metrics, where the wedge alert reads them (spark_llm.group.wedge
    TokenWatch): the release's names for its running requests and its generated tokens."""

    path: str
    running: str
    generated: str


class RouterRestart(TypedDict):
    """One time the supervisor brought the router back."""

    at: str
    found: str
    """What it found: `absent` (removed) or the container's status (`exited`, `created`, ...)."""
    result: str
    """`started`, `created and started`, or `failed: ...`."""


class SupervisorSpec(TypedDict):
    """What scripts/supervisor.py reads (spark_llm.plan.supervisor.spec writes it)."""

    deployment: str
    """The group's identity (revision and container IDs): a new one starts a new budget."""
    revision: str
    container: str
    members: list[SpecMember]
    docker_socket: str
    key_path: str
    known_hosts: str
    ssh_options: list[str]
    api_host: str
    api_port: int
    model: str
    """The served model's name: "serving" is a one-token completion of it (spark_llm.group.serving)."""
    api_key_file: str
    """Where the container sees the engine's API key file ("" without spark-llm:apiKey)."""
    ready_seconds: float
    startup_grace: float
    poll_seconds: float
    wedge_seconds: float
    """spark-llm:supervisor.wedgeSeconds: rank 0 live but answering nothing this long is a wedge (group.wedge)."""
    budget: Budget
    state_path: str
    weights_record: str
    """Where the container sees the head's weights record (read-only; spark_llm.group.weights): before it starts
    the group, the supervisor reads every member's and starts nothing on weights not verified there."""
    memory: MemorySpec
    """How it judges each node's memory before a restart (spark_llm.group.memory.restart_held)."""
    meminfo: str
    """Where the container sees the head's /proc/meminfo (read-only)."""
    router: NotRequired[RouterSpec]
    """With spark-llm:router: the router it keeps up (never restarting an engine for it)."""
    history_path: str
    """Where the container sees the head's history of starts (read-write): each restart it makes is a line there, as
    `pulumi up`'s gate writes one (spark_llm.group.history), so status and preview read the latest whoever made it."""
    profile: str
    """The engine profile, as the gate records it with a start."""
    tokens: NotRequired[TokenSignal]
    """With spark-llm:monitoring: the wedge alert's own signal, read at rank 0 beside the probes (group.wedge)."""
    fabric: NotRequired[SupervisorFabric]
    """With roceDevices and more than one node: each restart's fabric proof, as the gate's."""
    fabric_ready: NotRequired[SupervisorFabricReady]
    """With more than one node: the fabric a restart needs (spark_llm.group.fabric_ready), read before each."""
    textfile: NotRequired[str]
    """With spark-llm:monitoring: the directory (in the container) where it writes its metrics every poll, for the
    head's node exporter (spark_llm.group.agent_metrics)."""


class SupervisorFabric(TypedDict):
    roce_devices: list[str]
    addresses: dict[str, str]
    """Each member's fabric address (Ray relays a rank's lines into the head's log tagged with it)."""


class SupervisorFabricReady(TypedDict):
    roce_devices: list[str]
    """spark-llm:network.roceDevices as written; [] without RDMA."""
    interfaces: list[str]
    mtu: int
    sysfs: str
    """Where the head's /sys is mounted in the supervisor's container."""
    stack: str
    """The stack's name, for the commands a fault's fix names (`spark-llm exec --stack NAME ...`)."""


class GaveUp(TypedDict):
    at: str
    reason: str
    restarts: int


class RestartRecord(TypedDict, total=False):
    """One restart the supervisor made (the budget reads `started` and `ended`)."""

    at: str
    started: float
    ended: float
    reason: str
    cause: str
    """group.wedge.WEDGED for a wedged group (containers up, no answer); absent for a member that stopped."""
    result: str
    """IN_PROGRESS, `served`, `failed: ...` or `interrupted: ...`."""
    seconds_to_serving: float | None
    logs: dict[str, list[str]]


class SupervisorState(TypedDict, total=False):
    """The supervisor's state file."""

    deployment: str
    revision: str
    restarts: list[RestartRecord]
    gave_up: GaveUp | None
    waiting: str | None
    checked_at: str
    router_restarts: list[RouterRestart]
    """With spark-llm:router: each time the router was brought back (the latest last)."""


def dumps(record: SupervisorSpec | SupervisorState) -> str:
    """The one way a record is written: indented, keys sorted, a newline at the end."""
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def parse_state(text: str) -> SupervisorState | None:
    """The state file's text -> the state (None: not a state)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None  # type: ignore[return-value]
