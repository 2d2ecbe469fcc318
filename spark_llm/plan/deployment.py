"""Pure planning: config in, everything the resources need out. No Pulumi, no I/O (the template is passed in).

The plan fixes the start order (workers, then the head), renders the one launch script every node gets, the
engine command line per role, and the group revision: a digest of everything that, when it changes, needs
the whole group restarted in order. Every value a component or the CLI needs from the config is a field here,
read once (key paths, the API key, each node's config key); spark_llm.plan.steps builds the node steps from it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import shlex
from dataclasses import dataclass, field

from spark_llm.config import NAMESPACE
from spark_llm.config.group import GroupConfig
from spark_llm.config.image import Image
from spark_llm.config.model import ModelSource
from spark_llm.config.supervisor import Supervisor
from spark_llm.group.history import history_path
from spark_llm.group.order import start_order
from spark_llm.group.serving import render_api_config
from spark_llm.plan.engines import NodeLaunch, Topology, profile_for
from spark_llm.plan.engines.common import Member
from spark_llm.plan.hosts import KeyFile, SshHost, key_files, ssh_hosts
from spark_llm.plan.nodes import RAY_TOKEN_NAME, NodePlan, remote_dir
from spark_llm.plan.router import engine_behind_router, router_endpoint
from spark_llm.plan.scripts import LAUNCH_TEMPLATE
from spark_llm.plan.start.rendezvous import TORCH_NCCL_TIMEOUT_SECONDS, rendezvous_timeout

# Where an engine container sees the launch script (its entrypoint) and the engine env file, both read-only.
CONTAINER_SCRIPT = "/spark-llm/launch.sh"
CONTAINER_ENV_FILE = "/spark-llm/engine.env"
# Where a Ray container sees the group's Ray token (RAY_AUTH_TOKEN_PATH), read-only; see `ray_auth`.
CONTAINER_RAY_TOKEN = "/spark-llm/ray-token"


@dataclass(frozen=True)
class DeploymentPlan:
    config: GroupConfig
    """The group's config (the stack's sections beside its model), for the plan's own step builders: what reads the
    plan takes its fields, never this."""
    image: Image
    """spark-llm:image: the reference, its platform, how it reaches the nodes."""
    nodes: tuple[NodePlan, ...]
    launch_script: str
    env_file: str
    group_revision: str
    endpoint: str
    container: str
    port: int
    model_name: str
    ready_timeout: float
    api_config: str | None = None
    """The head's `--config` file carrying spark-llm:apiKey (secret content; None without a key)."""
    api_config_path: str | None = None
    api_address: str = "127.0.0.1"
    """Where the head itself reaches its API (the readiness gate, `spark-llm status`); see `api_address_on_head`."""
    ray_auth: bool = False
    """Ray's token authentication is on (the Ray executor): every node gets the stack's Ray token as a 0600 file."""
    api_key: str | None = None
    """spark-llm:apiKey (secret), what clients send; the readiness gate sends it too. None: no key."""
    fabric_key_path: str = ""
    """The head's private key for its hops to the workers over the fabric (`fabric_key_path`): a path on the head."""
    profile: str = "sglang"
    """The engine profile's name (spark_llm.plan.engines): which log lines mark its start phases."""
    stall_seconds: float | None = None
    """spark-llm:timeouts.stallSeconds: one bound for every start phase (None: each phase's own)."""
    on_failure: str = "stop"
    probation_seconds: int = 0
    """spark-llm:rollout.probationSeconds: how long the gate keeps watching a start after rank 0's first answer."""
    """spark-llm:rollout.onFailure: after a failed start, print the rollback command (stop) or run it (rollback)."""
    supervisor: Supervisor | None = None
    """spark-llm:supervisor when enabled (spark_llm.plan.supervisor); None: the stack has no supervisor."""
    key_files: dict[str, KeyFile] = field(default_factory=dict)
    """Each node's ssh key file on this machine (`key_files`)."""
    # Resolved once here for what the operator CLI checks against the nodes (`spark-llm preflight`, `smoke`): ops
    # reads these, never the raw config.
    api_host: str = "0.0.0.0"
    """spark-llm:engine.host: the address the API listens on, on the head."""
    dist_port: int = 0
    """spark-llm:engine.distPort: the engines' rendezvous port."""
    fabric_interfaces: tuple[str, ...] = ()
    """spark-llm:network.fabricInterfaces."""
    fabric_mtu: int = 0
    """spark-llm:network.mtu."""
    model_path: str = ""
    """spark-llm:model.path: the weights' directory on every node."""
    model_source: ModelSource | None = None
    """Where the weights come from (spark-llm:model.source, or the head's model.path when unset)."""
    startup_grace: float = 5
    """spark-llm:timeouts.startupGraceSeconds: how long a started member must stay up."""
    wedge_seconds: float = 180
    """spark-llm:supervisor.wedgeSeconds: rank 0 up by its liveness route (or having answered) yet answering nothing
    this long is a wedge, to the readiness gate as to the supervisor (spark_llm.group.wedge)."""
    launches: dict[str, NodeLaunch] = field(default_factory=dict)
    """Each node's engine command line and environment, from the engine profile (`node_launches`)."""
    engine_version: str = ""
    drop_caches: bool = False
    """spark-llm:memory.dropCaches: each node drops its page cache just before its engine starts."""
    """spark-llm:engine.version: the release the flags were checked against."""
    gpus: bool = True
    """spark-llm:engine.gpus: the containers get the node's GPUs."""
    rdma: bool = False
    """spark-llm:network.roceDevices is set: the containers get the verbs devices and may lock memory."""
    roce_devices: tuple[str, ...] = ()
    """spark-llm:network.roceDevices: what each rank's NCCL must say it uses (spark_llm.plan.fabric_proof)."""
    memlock_bytes: int = -1
    """spark-llm:network.memlockBytes: the containers' memlock limit with RDMA (-1: unlimited)."""
    fabric_proof: str = "fail"
    """spark-llm:network.fabricProof: a rank on NCCL's sockets fails the start (fail) or is named (warn)."""
    engine_flags: tuple[str, ...] = ()
    """Every `--flag` the launch passes to the engine on any node, in order, once each (`engine_flags`)."""
    restore_weights: str | None = None
    """A rollback's `pulumi up`: the manifest digest of the weights the last good start served, which every node
    kept (spark_llm.plan.weights.steps: the weights steps put it back instead of copying from the source)."""
    rendezvous: tuple[float, str] = (TORCH_NCCL_TIMEOUT_SECONDS, "torch.distributed's NCCL default")
    """How long the engine itself waits for its group to form, and why (spark_llm.plan.start.rendezvous)."""
    router_port: int | None = None
    """spark-llm:router.port on the head (None: no router): `spark-llm preflight` checks nothing else holds it."""
    unit: str | None = None
    """None: the stack's one model, or the first of several (it keeps the single form's names). Else this model's key
    (spark_llm.config.models.Deployment.key): what on a node is this group's alone (its directory, supervisor,
    firewall table) carries it."""

    model_key: str = f"{NAMESPACE}:model"
    """Where the stack file declares this model: `spark-llm:model` (the single form) or `spark-llm:models[i]`."""

    def key(self, path: str) -> str:
        """One of this model's keys as its stack file spells it: `engine.port` is `spark-llm:engine.port` in the
        single form, `spark-llm:models[1].engine.port` in a list; `model.path` is `spark-llm:models[1].path` there."""
        if self.model_key == f"{NAMESPACE}:model":
            return f"{NAMESPACE}:{path}"
        return f"{self.model_key}.{path.removeprefix('model.')}"

    def own(self, name: str) -> str:
        """A node-wide name (a container, a table) as this group's own: `name-<unit>` among several models."""
        return name if self.unit is None else f"{name}-{self.unit}"

    @property
    def head(self) -> NodePlan:
        return self.nodes[0]

    @property
    def workers(self) -> tuple[NodePlan, ...]:
        return self.nodes[1:]

    @property
    def start_order(self) -> list[str]:
        """Workers first (they wait for the head's rendezvous), the head last (spark_llm.group.order)."""
        return start_order([n.name for n in self.nodes])

    @property
    def engine(self) -> str:
        """spark-llm:engine.kind: sglang or vllm."""
        return self.config.engine.kind

    @property
    def history_path(self) -> str:
        """The head's history of starts (spark_llm.group.history), the one place its path is made."""
        return history_path(self.head.remote_dir)


API_CONFIG_NAME = "api-key.yaml"
# Defined in spark_llm.plan.nodes (the step planners take a node without importing this module); named here too.
__all__ = ["LAUNCH_TEMPLATE", "RAY_TOKEN_NAME", "DeploymentPlan", "NodePlan", "build_plan", "remote_dir"]


def fabric_key_path(cfg: GroupConfig) -> str:
    """The head's key for the fabric hops (spark-llm:network.fabricKeyPath), as the head's own ssh reads it: a path
    on the head, used as written (not expanded here: this machine's home is not the head's)."""
    return cfg.network.fabric_key_path


def api_config_path(cfg: GroupConfig, unit: str | None = None) -> str | None:
    """Where the head keeps the API key file, beside its launch script; None when the stack has no key."""
    return f"{remote_dir(cfg.head.user, unit)}/{API_CONFIG_NAME}" if cfg.api_key else None


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def api_address_on_head(listen: str) -> str:
    """Where a program on the head reaches an API listening on `listen` (spark-llm:engine.host), URL-ready.

    Listening on every address: loopback (no port needs to be open outside). Else the one address itself (it is
    the head's own: loopback would find nothing there).
    """
    address = ipaddress.ip_address(listen)
    if address.is_unspecified:
        return "127.0.0.1" if address.version == 4 else "[::1]"
    return _url_host(listen)


def endpoint(cfg: GroupConfig) -> str:
    """The API's URL: the router's with spark-llm:router (spark_llm.plan.router); else at the head's host (as this
    machine reaches it) when it listens on every address, else at the one address it listens on (a loopback one
    answers on the head only: through an ssh tunnel from here)."""
    routed = router_endpoint(cfg.stack)
    if routed is not None:
        return routed
    listen = ipaddress.ip_address(cfg.engine.host)
    host = cfg.head.host if listen.is_unspecified else cfg.engine.host
    return f"http://{_url_host(host)}:{cfg.engine.port}"


def topology(cfg: GroupConfig, unit: str | None = None) -> Topology:
    """The group as the engine profiles see it: ranks (head first), ports, model, fabric declaration."""
    ordered = [cfg.head, *cfg.workers]
    return Topology(
        members=tuple(Member(n.name, rank, n.fabric_address) for rank, n in enumerate(ordered)),
        model_path=cfg.model.path,
        served_name=cfg.model.name,
        api_port=cfg.engine.port,
        dist_port=cfg.engine.dist_port,
        api_host=cfg.engine.host,
        user_flags=tuple(cfg.engine.flags),
        fabric_interfaces=tuple(cfg.network.fabric_interfaces),
        roce_devices=tuple(cfg.network.roce_devices),
        gpus=cfg.engine.gpus,
        api_config=api_config_path(cfg, unit),
        ray_token_file=CONTAINER_RAY_TOKEN if ray_auth(cfg) else None,
        metrics=cfg.monitoring is not None,
    )


def ray_auth(cfg: GroupConfig) -> bool:
    """Whether the group runs Ray, and so Ray's token authentication (every Ray port answers only the token)."""
    return cfg.engine.executor == "ray"


def node_launches(cfg: GroupConfig, unit: str | None = None) -> dict[str, NodeLaunch]:
    """Each node's container command and environment, from the engine profile."""
    profile = profile_for(cfg.engine.kind, cfg.engine.executor)
    topo = topology(cfg, unit)
    return {m.name: profile.launch(topo, m) for m in topo.members}


def _bash_assoc(mapping: dict[str, str | int]) -> str:
    return "(" + " ".join(f"[{shlex.quote(k)}]={shlex.quote(str(v))}" for k, v in mapping.items()) + ")"


def render_env_file(cfg: GroupConfig) -> str:
    """The engine's environment, one KEY=value a line (docker --env-file format: no quoting)."""
    return "".join(f"{k}={v}\n" for k, v in sorted(cfg.engine.env.items()))


def group_revision(cfg: GroupConfig, template: str, env_file: str) -> str:
    """Digest of what the whole group must restart for: script template, env, image, weights, engine, topology.

    It hashes the template and the config, not the rendered script, so the script can carry it (as the
    containers' label) without hashing itself.
    """
    material = json.dumps(
        {
            "template": template,
            "env": env_file,
            "image": cfg.image.model_dump(),
            "model": cfg.model.model_dump(),
            # The version only picks the flag catalog the config is checked against: nothing to restart for.
            # The default host is left out so that adding the key restarted no running group.
            "engine": cfg.engine.model_dump(
                exclude={"version"} | ({"host"} if cfg.engine.host == "0.0.0.0" else set())
            ),
            "nodes": [(n.name, n.role, n.fabric_address) for n in cfg.nodes],
            # Whether there is a key, never the key: the revision is a label on every container and a stack output.
            # (A new key restarts the group through its file's secret digest; see components/engine_group.py.)
            "api_key": cfg.api_key is not None,
            # SGLang's rank 0 serves /metrics only with the flag spark-llm:monitoring adds: the group restarts for it
            # (in order, as for any flag). Absent otherwise, so that vLLM's groups and stacks without monitoring
            # keep their revision.
            **({"metrics": True} if cfg.monitoring is not None and cfg.engine.kind == "sglang" else {}),
        },
        sort_keys=True,
    )
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def render_launch_script(cfg: GroupConfig, template: str, nodes: tuple[NodePlan, ...], revision: str) -> str:
    values = {
        "CONTAINER": shlex.quote(cfg.engine.container_name),
        "ENV_FILE": shlex.quote(CONTAINER_ENV_FILE),
        "STARTUP_GRACE": str(cfg.timeouts.startup_grace_seconds),
        "PROFILE": shlex.quote(profile_for(cfg.engine.kind, cfg.engine.executor).name),
        "NODE_RANK": _bash_assoc({n.name: n.rank for n in nodes}),
        "GROUP_REVISION": shlex.quote(revision),
    }
    out = template
    for key, value in values.items():
        out = out.replace(f"@@{key}@@", value)
    if "@@" in out:
        raise ValueError("launch template has a placeholder the plan does not fill: " + out[out.index("@@") :][:40])
    return out


def _engine_words(argv: tuple[str, ...]) -> list[str]:
    """The engine's own command words: a `bash -c` launch (Ray) holds them on its `vllm serve` line."""
    if argv[:2] != ("bash", "-c"):
        return list(argv)
    lines = [line for line in argv[2].splitlines() if "vllm serve" in line]
    return [w for line in lines for w in shlex.split(line)]


def engine_flags(launches: dict[str, NodeLaunch]) -> tuple[str, ...]:
    """Every `--flag` the launch script passes to the engine (all nodes), in order, without duplicates."""
    words = [w for launch in launches.values() for w in _engine_words(launch.argv)]
    return tuple(dict.fromkeys(w.split("=", 1)[0] for w in words if w.startswith("--")))


def build_plan(
    group: GroupConfig,
    template: str,
    restore_weights: str | None = None,
    hosts: dict[str, SshHost] | None = None,
) -> DeploymentPlan:
    """One model's group plan (`group`: spark_llm.config.stack.StackConfig.groups; its unit, the model's key among
    several, keeps its files on the nodes, its supervisor and firewall table apart from the others'). `hosts`: every
    node as ssh reaches it, resolved once for the stack (spark_llm.plan.stack); built here when not given."""
    unit = group.unit
    cfg = engine_behind_router(group)  # with a router, the engine's API on the head's fabric address only
    hosts = hosts if hosts is not None else ssh_hosts(group.stack)
    launches = node_launches(cfg, unit)
    ordered = [cfg.head, *cfg.workers]
    index = {n.name: i for i, n in enumerate(group.stack.nodes)}  # the stack file's (rank order: the head first)
    nodes = tuple(
        NodePlan(
            name=n.name,
            role=n.role,
            rank=rank,
            ssh=hosts[n.name],
            fabric_address=n.fabric_address,
            remote_dir=remote_dir(n.user, unit),
            config_key=f"{NAMESPACE}:nodes[{index[n.name]}]",
        )
        for rank, n in enumerate(ordered)
    )
    env_file = render_env_file(cfg)
    revision = group_revision(cfg, template, env_file)
    script = render_launch_script(cfg, template, nodes, revision)
    return DeploymentPlan(
        config=cfg,
        image=cfg.image,
        nodes=nodes,
        launch_script=script,
        env_file=env_file,
        group_revision=revision,
        endpoint=endpoint(cfg),
        container=cfg.engine.container_name,
        port=cfg.engine.port,
        model_name=cfg.model.name,
        ready_timeout=cfg.timeouts.ready_seconds,
        api_config=render_api_config(cfg.api_key) if cfg.api_key else None,
        api_config_path=api_config_path(cfg, unit),
        api_address=api_address_on_head(cfg.engine.host),
        ray_auth=ray_auth(cfg),
        api_key=cfg.api_key,
        fabric_key_path=fabric_key_path(cfg),
        profile=profile_for(cfg.engine.kind, cfg.engine.executor).name,
        stall_seconds=cfg.timeouts.stall_seconds,
        on_failure=cfg.rollout.on_failure,
        probation_seconds=cfg.rollout.probation_seconds,
        supervisor=cfg.supervisor if cfg.supervisor.enabled else None,
        key_files={n.name: key_files(group.stack)[n.name] for n in cfg.nodes},
        api_host=cfg.engine.host,
        dist_port=cfg.engine.dist_port,
        fabric_interfaces=tuple(cfg.network.fabric_interfaces),
        fabric_mtu=cfg.network.mtu,
        model_path=cfg.model.path,
        model_source=cfg.model.effective_source,
        launches=launches,
        engine_version=cfg.engine.version,
        drop_caches=cfg.memory.drop_caches,
        gpus=cfg.engine.gpus,
        rdma=bool(cfg.network.roce_devices),
        roce_devices=tuple(cfg.network.roce_devices),
        memlock_bytes=cfg.network.memlock_bytes,
        fabric_proof=cfg.network.fabric_proof,
        engine_flags=engine_flags(launches),
        startup_grace=cfg.timeouts.startup_grace_seconds,
        wedge_seconds=cfg.supervisor.wedge_seconds,
        restore_weights=restore_weights,
        rendezvous=rendezvous_timeout(profile_for(cfg.engine.kind, cfg.engine.executor).name, cfg.engine.flags),
        router_port=cfg.router.port if cfg.router is not None else None,
        unit=unit,
        model_key=group.deployment.config_key,
    )
