"""vLLM across nodes, two ways.

- native (no Ray; the default of today's most used Spark launcher): workers run `vllm serve --headless` with
  their node rank and wait for the master at the head; the head (rank 0) starts last and serves the API.
- ray (what finally worked in the seeds): every node joins one Ray cluster (workers first; they retry until
  the head's Ray is up), then the head checks that every node's GPU is in the cluster and runs
  `vllm serve --distributed-executor-backend ray`.
"""

from __future__ import annotations

import shlex

from spark_llm.config.engine import RAY_PORT
from spark_llm.plan.engines.common import EngineProfile, Member, NodeLaunch, Topology, api_config_args, fabric_env

RAY_JOIN_SECONDS = 600
RAY_DASHBOARD_HOST = "127.0.0.1"
# The first Ray with token authentication; an older one ignores RAY_AUTH_MODE and would run open to anyone.
RAY_AUTH_SINCE = (2, 52)


def _common(topo: Topology) -> list[str]:
    return [
        "vllm",
        "serve",
        topo.model_path,
        "--served-model-name",
        topo.served_name,
        # One GPU per Spark: the tensor-parallel group spans the nodes.
        "--tensor-parallel-size",
        str(topo.nnodes),
    ]


def _env(topo: Topology, member: Member) -> dict[str, str]:
    # vLLM binds its distributed init and Ray registration to this address: the fabric, not the management net.
    return {"VLLM_HOST_IP": member.fabric_address, **fabric_env(topo, member)}


def _native(topo: Topology, member: Member) -> NodeLaunch:
    argv = [
        *_common(topo),
        "--nnodes",
        str(topo.nnodes),
        "--node-rank",
        str(member.rank),
        "--master-addr",
        topo.head.fabric_address,
        "--master-port",
        str(topo.dist_port),
    ]
    if member.rank == 0:
        argv += ["--host", topo.api_host, "--port", str(topo.api_port), *api_config_args(topo)]
    else:
        argv += ["--headless"]
    argv += topo.user_flags
    return NodeLaunch(tuple(argv), _env(topo, member))


def _ray_auth_env(topo: Topology) -> dict[str, str]:
    """Ray's token authentication (Ray >= 2.52), the same on every node of the cluster.

    Ray's gRPC servers (GCS on 6379, each raylet's node and object manager, each worker process) listen on every
    address of a node whatever `--node-ip-address` says, and without a token anyone who reaches one can run code
    there. With RAY_AUTH_MODE=token every Ray RPC and HTTP entry point refuses a caller without the token. Ray
    reads it from the file RAY_AUTH_TOKEN_PATH names (a missing or empty file is fatal, never a silent fallback
    to no auth): the token is on no command line and in no container's configuration.
    """
    if topo.ray_token_file is None:
        raise ValueError("the Ray executor needs the group's Ray token file (Topology.ray_token_file)")
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": topo.ray_token_file}


def ray_auth_check() -> str:
    """Bash that stops the node before `ray start` when the image's Ray predates token authentication.

    Such a Ray ignores RAY_AUTH_MODE without a word: the cluster would listen on every address, open to anyone.
    """
    since = ".".join(map(str, RAY_AUTH_SINCE))
    probe = (
        "import ray, sys; v = ray.__version__; print(v); "
        f"sys.exit(0 if tuple(int(p) for p in v.split('.')[:2]) >= {RAY_AUTH_SINCE!r} else 1)"
    )
    return (
        f"if ! ray_version=$(python3 -c {shlex.quote(probe)}); then\n"
        f'  echo "spark-llm: Ray ${{ray_version:-(not importable)}} in this image has no token authentication'
        f" (Ray >= {since}): spark-llm does not start a Ray cluster open to anyone. Use an image with Ray"
        f' {since} or newer (spark-llm:image.ref)" >&2\n'
        "  exit 1\n"
        "fi\n"
    )


def _ray(topo: Topology, member: Member) -> NodeLaunch:
    env = {
        **_env(topo, member),
        **_ray_auth_env(topo),
        # Ray's memory monitor kills workers under unified-memory pressure on a Spark (GPU memory is host memory).
        "RAY_memory_monitor_refresh_ms": "0",
        # The head relays every worker's output into its own log, which is read in files and `pulumi up` errors,
        # not on a terminal: no colour escapes around the `(RayWorkerWrapper pid=N, ip=ADDR)` prefixes.
        "RAY_COLOR_PREFIX": "0",
        # A deployment does not report usage to anyone (and a cluster's network may have no route out).
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    if topo.roce_devices:
        # The fabric proof reads every worker's NCCL lines in the head's log, where Ray relays them: its dedup drops
        # a line that matches another worker's once every word with a digit is removed (ray/_private/ray_logging's
        # _canonicalise_log_line), which is every rank's `NET/IB : Using ...`. Only with RoCE, as NCCL_DEBUG.
        env["RAY_DEDUP_LOGS"] = "0"
    head = f"{topo.head.fabric_address}:{RAY_PORT}"
    if member.rank > 0:
        script = (
            ray_auth_check() + f"deadline=$((SECONDS + {RAY_JOIN_SECONDS}))\n"
            f"until ray start --address={shlex.quote(head)} --node-ip-address={shlex.quote(member.fabric_address)}"
            " --num-gpus=1 --block; do\n"
            f'  [ "$SECONDS" -lt "$deadline" ] || {{ echo "Ray head at {head} not reachable after'
            f' {RAY_JOIN_SECONDS} s" >&2; exit 1; }}\n'
            f'  echo "waiting for the Ray head at {head}"; sleep 3\n'
            "done\n"
        )
        return NodeLaunch(("bash", "-c", script), env)
    serve = [
        *_common(topo),
        "--distributed-executor-backend",
        "ray",
        "--host",
        topo.api_host,
        "--port",
        str(topo.api_port),
        *api_config_args(topo),
        *topo.user_flags,
    ]
    script = (
        ray_auth_check()
        + f"ray start --head --node-ip-address={shlex.quote(member.fabric_address)} --port={RAY_PORT} --num-gpus=1"
        # vLLM needs no dashboard: without it the head keeps only Ray's job/state API, on loopback (named here so a
        # change of Ray's default cannot open it on every address).
        f" --include-dashboard=false --dashboard-host={RAY_DASHBOARD_HOST}\n"
        f"deadline=$((SECONDS + {RAY_JOIN_SECONDS}))\n"
        # Every node's GPU must be in the cluster before vLLM places its workers. The check prints the nodes it
        # counted from the cluster's own state: `ray status` below reads the autoscaler's report, which can lag
        # by seconds and show fewer nodes than there are.
        f"until python3 -c '{_gpu_check(topo.nnodes)}'; do\n"
        f'  [ "$SECONDS" -lt "$deadline" ] || {{ echo "Ray cluster has fewer than {topo.nnodes} GPUs after'
        f' {RAY_JOIN_SECONDS} s" >&2; ray status >&2; exit 1; }}\n'
        f'  echo "waiting for {topo.nnodes} GPUs in the Ray cluster"; sleep 3\n'
        "done\n"
        "ray status\n"
        f"exec {' '.join(shlex.quote(a) for a in serve)}\n"
    )
    return NodeLaunch(("bash", "-c", script), env)


def _gpu_check(nnodes: int) -> str:
    """Python for `python3 -c '...'`: exit 0 once the live Ray nodes hold `nnodes` GPUs, naming them."""
    return (
        'import ray, sys; ray.init(address="auto", logging_level="ERROR"); '
        'nodes = sorted((n for n in ray.nodes() if n["Alive"]), key=lambda n: n["NodeManagerAddress"]); '
        'gpus = sum(n["Resources"].get("GPU", 0) for n in nodes); '
        f"ok = gpus >= {nnodes}; "
        'ok and print("Ray cluster ready: %d nodes, %g GPUs: %s" % (len(nodes), gpus, ", ".join('
        '"%s (%g GPU)" % (n["NodeManagerAddress"], n["Resources"].get("GPU", 0)) for n in nodes))); '
        "sys.exit(0 if ok else 1)"
    )


VLLM_NATIVE = EngineProfile(
    name="vllm-native",
    start_order=("workers: headless ranks, waiting for the master", "head: rank 0, serves the API"),
    launch=_native,
)

VLLM_RAY = EngineProfile(
    name="vllm-ray",
    start_order=(
        "workers: join the Ray cluster (retrying until the head's Ray is up)",
        "head: Ray head, waits for every node's GPU, then vllm serve --distributed-executor-backend ray",
    ),
    launch=_ray,
)
