"""SGLang: every rank runs the server; rank 0 serves the API, the others only answer a dummy /health.

Start order: workers first (they wait for rank 0's rendezvous at --dist-init-addr), the head last; "started"
means the process is up (a bad flag or an init crash exits within the startup grace).
"""

from __future__ import annotations

from spark_llm.plan.engines.common import EngineProfile, Member, NodeLaunch, Topology, api_config_args, fabric_env


def _launch(topo: Topology, member: Member) -> NodeLaunch:
    argv = [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        topo.model_path,
        "--served-model-name",
        topo.served_name,
        # On Sparks one GPU per node: the tensor-parallel group spans the nodes.
        "--tp-size",
        str(topo.nnodes),
        "--nnodes",
        str(topo.nnodes),
        "--node-rank",
        str(member.rank),
        "--dist-init-addr",
        f"{topo.head.fabric_address}:{topo.dist_port}",
        "--port",
        str(topo.api_port),
    ]
    if member.rank == 0:
        argv += ["--host", topo.api_host, *api_config_args(topo)]
        if topo.metrics and "--enable-metrics" not in topo.user_flags:
            argv.append("--enable-metrics")
    argv += topo.user_flags
    # SGLang picks its own address for the distributed init from this.
    env = {"SGLANG_HOST_IP": member.fabric_address, **fabric_env(topo, member)}
    return NodeLaunch(tuple(argv), env)


SGLANG = EngineProfile(
    name="sglang",
    start_order=("workers: server ranks > 0, waiting for rank 0", "head: rank 0, serves the API"),
    launch=_launch,
)
