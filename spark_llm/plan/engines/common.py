"""What every engine profile shares: the group's topology, per-node launches and the fabric environment."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Member:
    name: str
    rank: int
    fabric_address: str


@dataclass(frozen=True)
class Topology:
    """The group as the engine sees it: ranks in start order, the head's fabric address, ports, the model."""

    members: tuple[Member, ...]  # rank order: the head (rank 0) first
    model_path: str
    served_name: str
    api_port: int
    dist_port: int
    # The address rank 0's API listens on (spark-llm:engine.host): every address of the head, or one.
    api_host: str = "0.0.0.0"
    user_flags: tuple[str, ...] = ()
    fabric_interfaces: tuple[str, ...] = ()
    roce_devices: tuple[str, ...] = ()
    gpus: bool = True
    # A 0600 YAML file on the head holding `api-key:`, passed as `--config` to the rank that serves the API (both
    # engines merge `--config FILE` into their flags): the key never appears on a command line. None: no key.
    api_config: str | None = None
    # Where the Ray executor's processes read the group's Ray token (RAY_AUTH_TOKEN_PATH, a read-only mount of a
    # 0600 file): the token is on no command line and in no container's environment. None: no Ray.
    ray_token_file: str | None = None
    # spark-llm:monitoring is on: the rank serving the API serves /metrics too (vLLM always does; SGLang only with
    # its flag). Off, no flag is added: a stack without monitoring keeps its launch flags, and its groups their
    # revision, across an upgrade of spark-llm.
    metrics: bool = False

    @property
    def nnodes(self) -> int:
        return len(self.members)

    @property
    def head(self) -> Member:
        return self.members[0]


@dataclass(frozen=True)
class NodeLaunch:
    """The container command and the (non-secret) environment of one node."""

    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineProfile:
    """One way to run an engine across nodes."""

    name: str
    # Roles in start order, for people (logs, docs): what "started" means for each.
    start_order: tuple[str, ...]
    launch: Callable[[Topology, Member], NodeLaunch]


def fabric_env(topo: Topology, member: Member) -> dict[str, str]:
    """Per-node environment from the one fabric declaration (`spark-llm:network`)."""
    env: dict[str, str] = {}
    if topo.fabric_interfaces:
        ifnames = ",".join(topo.fabric_interfaces)
        # NCCL's bootstrap and socket transport, and Gloo (CPU collectives, used at init), must use the direct
        # link: left alone they pick the first interface up, often the management network.
        env["NCCL_SOCKET_IFNAME"] = ifnames
        env["GLOO_SOCKET_IFNAME"] = ifnames
        # UCX (used by NIXL/KV transfer in both engines) the same; it wants device:port pairs or names.
        env["UCX_NET_DEVICES"] = ifnames
    if topo.roce_devices:
        # A Spark's ConnectX-7 port shows up as two RoCE devices ("twins"); listing both lets NCCL use the
        # whole 200 Gb/s instead of one half.
        env["NCCL_IB_HCA"] = ",".join(topo.roce_devices)
        # The fabric proof (spark_llm.plan.fabric_proof) reads each rank's own transport lines: NCCL prints them at
        # INFO, and INIT,NET keeps it to init and the network (not every collective). Only with roceDevices: without
        # them sockets are what was asked for, and a new env var in every container would restart every group on
        # upgrade (tests/integration/test_upgrade.py).
        env["NCCL_DEBUG"] = "INFO"
        env["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    return env


def api_config_args(topo: Topology) -> list[str]:
    """`--config FILE` for the API-serving rank when the stack has an API key (see Topology.api_config)."""
    return ["--config", topo.api_config] if topo.api_config else []
