"""Command-line flags of the real engines, one table per engine, parsed into an engine-neutral LaunchConfig."""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Flag:
    """One flag of a real engine's command line and the LaunchConfig field it fills."""

    names: tuple[str, ...]
    """Spellings the real engine accepts, first one canonical (`--tp-size`, `--tp`)."""
    field: str
    """LaunchConfig field this flag fills."""
    type: Callable[[str], object] | None
    """Value parser (`int`, `float`, `str`); None makes a store-true switch."""
    default: object = None
    required: bool = False
    help: str = ""


@dataclass(frozen=True, kw_only=True)
class EngineProfile:
    """How one real engine is launched: its display name, argparse prog and flag table."""

    display_name: str
    prog: str
    flags: tuple[Flag, ...]


# SGLang's `python3 -m sglang.launch_server` (python/sglang/srt/server_args.py); only the flags spark-llm uses.
# Defaults are SGLang's, except --dist-timeout (SGLang: none, i.e. torch's own) which the stand-in bounds.
SGLANG_FLAGS: tuple[Flag, ...] = (
    Flag(
        names=("--model-path", "--model"),
        field="model_path",
        type=str,
        required=True,
        help="Model weights folder or hub id; the stand-in never reads it.",
    ),
    Flag(
        names=("--served-model-name",),
        field="served_model_name",
        type=str,
        help="Model name in the OpenAI API; defaults to --model-path.",
    ),
    Flag(names=("--tp-size", "--tp"), field="tp_size", type=int, default=1, help="Tensor parallel size."),
    Flag(names=("--nnodes",), field="nnodes", type=int, default=1, help="Number of nodes in the group."),
    Flag(names=("--node-rank",), field="node_rank", type=int, default=0, help="This node's rank, 0 is the head."),
    Flag(
        names=("--dist-init-addr", "--nccl-init-addr"),
        field="dist_init_addr",
        type=str,
        help="HOST:PORT where node rank 0 listens for the group's rendezvous.",
    ),
    Flag(names=("--host",), field="host", type=str, default="127.0.0.1", help="HTTP listen address."),
    Flag(names=("--port",), field="port", type=int, default=30000, help="HTTP listen port."),
    Flag(
        names=("--trust-remote-code",),
        field="trust_remote_code",
        type=None,
        default=False,
        help="Accepted and ignored.",
    ),
    Flag(
        names=("--mem-fraction-static",),
        field="mem_fraction_static",
        type=float,
        help="Accepted and ignored (no GPU memory here).",
    ),
    Flag(
        names=("--context-length",),
        field="context_length",
        type=int,
        help="Longest prompt plus completion, in stand-in tokens; defaults to 8192.",
    ),
    Flag(
        names=("--dist-timeout",),
        field="dist_timeout",
        type=int,
        default=300,
        help="Seconds to wait for the group to form (workers: to reach rank 0).",
    ),
)

ENGINE_PROFILES: dict[str, EngineProfile] = {
    "sglang": EngineProfile(display_name="SGLang", prog="launch_server.py", flags=SGLANG_FLAGS),
}

DEFAULT_CONTEXT_LENGTH = 8192


@dataclass(frozen=True, kw_only=True)
class LaunchConfig:
    """One node's launch of the stand-in engine, whatever real engine's command line it came from."""

    engine: str
    model_path: str
    served_model_name: str
    tp_size: int
    nnodes: int
    node_rank: int
    dist_init_addr: str | None
    host: str
    port: int
    trust_remote_code: bool
    mem_fraction_static: float | None
    context_length: int
    dist_timeout: int

    @property
    def is_head(self) -> bool:
        """Node rank 0 serves the OpenAI API and hosts the rendezvous."""
        return self.node_rank == 0

    @property
    def tp_rank(self) -> int:
        """First tensor-parallel rank on this node, as in the real engines' `TP<n>` log prefix."""
        return self.node_rank * (self.tp_size // self.nnodes)

    @property
    def group_digest(self) -> str:
        """Digest of what every rank of one group must agree on: model path, tp size, node count."""
        text = f"model_path={self.model_path}\ntp_size={self.tp_size}\nnnodes={self.nnodes}\n"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def rendezvous_address(self) -> tuple[str, int]:
        """(host, port) of --dist-init-addr, IPv6 hosts written `[addr]:port`."""
        if self.dist_init_addr is None:
            raise ValueError("--dist-init-addr is not set")
        return parse_host_port(self.dist_init_addr)


def parse_host_port(address: str) -> tuple[str, int]:
    """Split `host:port` or `[ipv6]:port`; raise ValueError naming the expected shape."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"expected HOST:PORT (e.g. 192.168.100.1:5000), got {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


def build_parser(engine: str) -> argparse.ArgumentParser:
    """The argparse parser for one engine's flag table."""
    profile = engine_profile(engine)
    parser = argparse.ArgumentParser(
        prog=profile.prog,
        description=f"spark-llm stand-in engine: a simulator of {profile.display_name}'s multi-node launch, "
        "no model, no GPU.",
    )
    for flag in profile.flags:
        if flag.type is None:
            parser.add_argument(*flag.names, dest=flag.field, action="store_true", help=flag.help)
        else:
            parser.add_argument(
                *flag.names,
                dest=flag.field,
                type=flag.type,
                default=flag.default,
                required=flag.required,
                help=flag.help,
            )
    return parser


def engine_profile(engine: str) -> EngineProfile:
    """The profile of a known engine; an unknown one raises an error that lists the known ones."""
    try:
        return ENGINE_PROFILES[engine]
    except KeyError:
        raise ValueError(f"unknown engine {engine!r}; known: {', '.join(sorted(ENGINE_PROFILES))}") from None


def parse_launch_config(engine: str, argv: Sequence[str]) -> LaunchConfig:
    """Parse a real engine's command line; bad or inconsistent flags exit 2 with argparse's usage line."""
    parser = build_parser(engine)
    args = parser.parse_args(list(argv))
    config = LaunchConfig(
        engine=engine,
        model_path=args.model_path,
        served_model_name=args.served_model_name or args.model_path,
        tp_size=args.tp_size,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        dist_init_addr=args.dist_init_addr,
        host=args.host,
        port=args.port,
        trust_remote_code=args.trust_remote_code,
        mem_fraction_static=args.mem_fraction_static,
        context_length=args.context_length or DEFAULT_CONTEXT_LENGTH,
        dist_timeout=args.dist_timeout,
    )
    problem = launch_config_problem(config)
    if problem:
        parser.error(problem)
    return config


def launch_config_problem(config: LaunchConfig) -> str | None:
    """The first inconsistency in a launch, worded like an argparse error, or None."""
    if config.nnodes < 1:
        return f"--nnodes must be at least 1, got {config.nnodes}"
    if not 0 <= config.node_rank < config.nnodes:
        return f"--node-rank must be in [0, {config.nnodes - 1}] for --nnodes {config.nnodes}, got {config.node_rank}"
    if config.tp_size < 1 or config.tp_size % config.nnodes:
        return f"--tp-size ({config.tp_size}) must be a positive multiple of --nnodes ({config.nnodes})"
    if config.nnodes > 1 and config.dist_init_addr is None:
        return "--dist-init-addr HOST:PORT is required when --nnodes > 1"
    if config.dist_init_addr is not None:
        try:
            parse_host_port(config.dist_init_addr)
        except ValueError as error:
            return f"--dist-init-addr: {error}"
    if config.dist_timeout < 1:
        return f"--dist-timeout must be at least 1 second, got {config.dist_timeout}"
    if config.context_length < 1:
        return f"--context-length must be positive, got {config.context_length}"
    return None
