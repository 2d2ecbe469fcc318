"""LaunchConfig: one node's launch, engine-neutral, and the consistency checks the real engines make on it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# Above this share of GPU memory (--mem-fraction-static, --gpu-memory-utilization) the stand-in's KV cache
# allocation runs out of memory: a flag the engine takes at parse time and dies on at load.
MAX_MEMORY_FRACTION = 0.95
VLLM_EXECUTOR_BACKENDS = ("external_launcher", "mp", "ray", "uni")  # the catalogs' metavar, checked as vLLM does


@dataclass(frozen=True, kw_only=True)
class LaunchConfig:
    """One node's launch of the stand-in engine, whatever real engine's command line it came from."""

    engine: str
    engine_version: str
    model_path: str
    served_model_name: str
    tp_size: int
    pp_size: int
    nnodes: int
    node_rank: int
    dist_init_addr: str | None
    """HOST:PORT of the group's rendezvous (SGLang --dist-init-addr, vLLM --master-addr:--master-port)."""
    host: str
    port: int
    headless: bool
    """vLLM --headless: no API server on this node, only the group."""
    executor_backend: str | None
    """vLLM --distributed-executor-backend (`ray` forms the group through the Ray cluster)."""
    trust_remote_code: bool
    context_length: int
    dist_timeout: int
    skipped_phases: tuple[str, ...] = ()
    """Start phases the command line turns off: SGLang --disable-cuda-graph (graph), vLLM --enforce-eager (compile
    and graph). Their lines are not printed, their knobs do nothing."""
    deprecated_flags: tuple[str, ...] = ()
    """Deprecated flags that were set; the launch logs a warning for each."""
    memory_fraction: float | None = None
    """SGLang --mem-fraction-static, vLLM --gpu-memory-utilization: the share of GPU memory the engine takes. Both
    engines accept any value up to 1 when they parse it; above MAX_MEMORY_FRACTION the stand-in runs out of memory
    when it allocates the KV cache, as a real engine does with nothing left for activations and CUDA graphs."""
    max_running: int | None = None
    """SGLang --max-running-requests, vLLM --max-num-seqs: requests beyond it wait for a slot (None: none wait)."""
    metrics: bool = False
    """Rank 0 serves GET /metrics (vLLM always; SGLang with --enable-metrics): standin_engine.metrics."""
    api_key: str | None = field(default=None, repr=False)
    """--api-key: the /v1 routes want `Authorization: Bearer KEY` (kept out of repr: server_args is logged)."""

    @property
    def is_head(self) -> bool:
        """Node rank 0 serves the OpenAI API and hosts the rendezvous."""
        return self.node_rank == 0

    @property
    def serves_api(self) -> bool:
        """Whether this node runs the OpenAI API (rank 0, not headless)."""
        return self.is_head and not self.headless

    @property
    def version(self) -> tuple[int, ...]:
        """The engine version as numbers, for the log lines whose wording changed between releases."""
        return tuple(int(part) for part in self.engine_version.split(".") if part.isdigit())

    @property
    def world_size(self) -> int:
        return self.tp_size * self.pp_size

    @property
    def uses_ray(self) -> bool:
        return self.executor_backend == "ray"

    @property
    def tp_rank(self) -> int:
        """First global rank on this node, as in the real engines' `TP<n>` / `Worker_TP<n>` log prefixes."""
        return self.node_rank * (self.world_size // self.nnodes)

    @property
    def group_digest(self) -> str:
        """Digest of what every rank of one group must agree on: model path, parallel sizes, node count."""
        text = f"model_path={self.model_path}\ntp_size={self.tp_size}\nnnodes={self.nnodes}\n"
        if self.pp_size != 1:
            text += f"pp_size={self.pp_size}\n"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def rendezvous_address(self) -> tuple[str, int]:
        """(host, port) of the rendezvous address, IPv6 hosts written `[addr]:port`."""
        if self.dist_init_addr is None:
            raise ValueError("no rendezvous address (--dist-init-addr / --master-addr) is set")
        return parse_host_port(self.dist_init_addr)


def parse_host_port(address: str) -> tuple[str, int]:
    """Split `host:port` or `[ipv6]:port`; raise ValueError naming the expected shape."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"expected HOST:PORT (e.g. 192.168.100.1:5000), got {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


def join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def launch_config_problem(config: LaunchConfig) -> str | None:
    """The first inconsistency in a launch, worded like an argparse error, or None."""
    tp_flag = "--tp-size" if config.engine == "sglang" else "--tensor-parallel-size"
    rendezvous_flag = "--dist-init-addr" if config.engine == "sglang" else "--master-addr/--master-port"
    if config.nnodes < 1:
        return f"--nnodes must be at least 1, got {config.nnodes}"
    if not 0 <= config.node_rank < config.nnodes:
        return f"--node-rank must be in [0, {config.nnodes - 1}] for --nnodes {config.nnodes}, got {config.node_rank}"
    if config.tp_size < 1 or config.pp_size < 1:
        return f"{tp_flag} ({config.tp_size}) and the pipeline parallel size ({config.pp_size}) must be positive"
    if config.world_size % config.nnodes:
        if config.pp_size == 1:
            return f"{tp_flag} ({config.tp_size}) must be a positive multiple of --nnodes ({config.nnodes})"
        return (
            f"{tp_flag} ({config.tp_size}) x pipeline parallel size ({config.pp_size}) must be a multiple of "
            f"--nnodes ({config.nnodes})"
        )
    if config.engine == "sglang" and config.nnodes > 1 and config.dist_init_addr is None:
        return "--dist-init-addr HOST:PORT is required when --nnodes > 1"
    if config.dist_init_addr is not None:
        try:
            parse_host_port(config.dist_init_addr)
        except ValueError as error:
            return f"{rendezvous_flag}: {error}"
    if config.executor_backend is not None and config.executor_backend not in VLLM_EXECUTOR_BACKENDS:
        return (
            f"--distributed-executor-backend {config.executor_backend!r} is not one of "
            f"{', '.join(VLLM_EXECUTOR_BACKENDS)}"
        )
    if config.uses_ray and config.nnodes > 1:
        return (
            "--nnodes/--node-rank are for the mp executor backend; with --distributed-executor-backend ray "
            "start only the head's `vllm serve`, the other nodes join with `ray start --address HEAD:6379`"
        )
    if config.dist_timeout < 1:
        return f"the dist timeout must be at least 1 second, got {config.dist_timeout}"
    if config.context_length < 1:
        return f"the context length must be positive, got {config.context_length}"
    return None
