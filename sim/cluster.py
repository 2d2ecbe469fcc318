"""The simulated dual-Spark cluster: docker-in-docker nodes on a management and a fabric network.

A head node sits on both networks (the operator reaches it on mgmt), workers sit on the internal
fabric network only and are reached through the head as an SSH jump host, as on the real Sparks.
State (keys, host keys, addresses) lives in <repo>/.sim/; `up` also writes <repo>/Pulumi.sim.yaml.

This module runs the commands (`up`, `down`, `status`) in their order; the steps live in the modules it imports
(sim/README.md, "Code").
"""

from __future__ import annotations

import shutil
from pathlib import Path

from host import Progress, SimError, docker, run, wait_until
from images import ensure_engine, ensure_node_image, load_image_into, load_monitoring_into, load_router_into
from memory import give_spark_memory
from names import LABEL_REPO, ClusterNames, check_prefix, default_prefix
from networks import ensure_networks, network_labels, network_subnet, unblock_fabric_route
from node_ssh import (
    SSH_READY_TIMEOUT_S,
    ensure_keypair,
    install_node_ssh,
    known_hosts_text,
    ssh_config_text,
    ssh_ok,
    write_private,
)
from nodes import (
    cluster_containers,
    container_info,
    ensure_node,
    mark_simulated,
    read_node,
    reclaim_orphans,
    remove_node,
    wait_for_node,
)
from paths import SimPaths
from stack_file import write_stack_file
from state import ClusterState

DEFAULT_WORKERS = 1


def up(
    paths: SimPaths,
    *,
    workers: int | None,
    prefix: str | None,
    load_image: Path | None,
    load_on: str = "head",
    image_tag: str | None = None,
    load_router: bool = False,
    load_monitoring: bool = False,
) -> ClusterState:
    progress = Progress()
    if load_image is not None and not load_image.is_file():
        raise SimError(f"--load-image {load_image}: no such file")
    if workers is not None and workers < 1:
        raise SimError(f"--workers {workers}: a cluster needs at least 1 worker")
    previous = ClusterState.load(paths.state_file)
    if previous and prefix and prefix != previous.prefix:
        raise SimError(
            f"a sim cluster named {previous.prefix!r} is recorded in {paths.state_dir}; "
            "run `sim down` before `sim up --name` with another name"
        )
    prefix = prefix or (previous.prefix if previous else default_prefix(paths.home))
    check_prefix(prefix)
    names = ClusterNames(prefix, owner=str(paths.home))

    ensure_engine(progress)
    image = ensure_node_image(progress)

    paths.state_dir.mkdir(mode=0o700, exist_ok=True)
    ensure_keypair(paths.operator_key, f"{prefix} sim operator")
    ensure_keypair(paths.fabric_key, f"{prefix} sim fabric")

    reclaim_orphans(names, progress)
    mgmt_subnet, fabric_subnet = ensure_networks(names, progress)
    state = ClusterState(
        prefix=prefix,
        image=image,
        mgmt_subnet=mgmt_subnet,
        fabric_subnet=fabric_subnet,
        nodes=previous.nodes if previous else [],
    )
    state.save(paths.state_file)  # so that `down` cleans up even after a failed `up`

    existing = cluster_containers(names)
    if workers is None:
        workers = sum(1 for c in existing if c.startswith(names.container("worker-"))) or DEFAULT_WORKERS
    wanted = [("head", "head")] + [(f"worker-{i}", "worker") for i in range(1, workers + 1)]
    wanted_containers = {names.container(node) for node, _ in wanted}
    for container in existing:
        if container not in wanted_containers:
            progress.step(f"{container}: removing (not among {workers} worker(s))")
            remove_node(names, container.removeprefix(f"{prefix}-"))

    for name, role in wanted:
        ensure_node(names, name, role, image, progress)
    for name, _ in wanted:
        progress.step(f"{names.container(name)}: waiting for sshd host key and inner docker engine")
        wait_for_node(names.container(name))

    nodes = [read_node(names, name, role) for name, role in wanted]
    state.nodes = nodes
    state.save(paths.state_file)

    progress.step("installing keys and pinned host keys (.sim/known_hosts, .sim/ssh_config)")
    install_node_ssh(paths, nodes)
    mark_simulated(nodes, prefix)
    progress.step("giving every node a GB10's memory (/proc/meminfo; sim/memory.py)")
    give_spark_memory([n.container for n in nodes])
    write_private(paths.known_hosts, known_hosts_text(nodes, include_mgmt=True))
    write_private(paths.ssh_config, ssh_config_text(paths, nodes))
    for node in nodes:
        progress.step(f"{node.name}: waiting for ssh ({'via head' if node.role == 'worker' else 'direct'})")
        wait_until(
            f"ssh to {node.name} ({node.ssh_host}) with its pinned host key",
            lambda node=node: ssh_ok(paths, node.name),
            SSH_READY_TIMEOUT_S,
        )

    if load_image is not None:
        load_image_into(names, nodes, load_image, load_on, image_tag, progress)

    router_image = load_router_into(names, nodes[0], progress) if load_router else None
    monitoring_image = load_monitoring_into(names, nodes, progress) if load_monitoring else None

    progress.step(f"writing {paths.stack_file}")
    write_stack_file(paths, nodes, router_image, monitoring_image)
    progress.step(f"cluster {prefix!r} is up: head + {workers} worker(s)")
    return state


def down(paths: SimPaths, *, prefix: str | None) -> None:
    progress = Progress()
    state = ClusterState.load(paths.state_file)
    prefix = prefix or (state.prefix if state else default_prefix(paths.home))
    check_prefix(prefix)
    names = ClusterNames(prefix, owner=str(paths.home))
    if shutil.which("docker") and shutil.which("dockerd"):
        ensure_engine(progress)
        containers = cluster_containers(names)
        if containers:
            progress.step(f"removing containers {' '.join(containers)}")
            docker("rm", "--force", "--volumes", *containers)
        # The host route that blocks our fabric goes with it; another work tree's stays.
        fabric_labels = network_labels(names.fabric_network)
        if fabric_labels is None:
            fabric_subnet = state.fabric_subnet if state else None
        elif fabric_labels.get(LABEL_REPO) == names.owner:
            fabric_subnet = network_subnet(names.fabric_network)
        else:
            fabric_subnet = None
        networks = docker("network", "ls", "--quiet", *names.filters()).split()
        if networks:
            progress.step(f"removing networks {names.mgmt_network}, {names.fabric_network}")
            docker("network", "rm", *networks)
        volumes = docker("volume", "ls", "--quiet", *names.filters()).split()
        if volumes:
            progress.step(f"removing volumes {' '.join(volumes)}")
            docker("volume", "rm", "--force", *volumes)
        if fabric_subnet:
            unblock_fabric_route(fabric_subnet)
    progress.step(f"removing {paths.state_dir} and {paths.stack_file.name}")
    shutil.rmtree(paths.state_dir, ignore_errors=True)
    paths.stack_file.unlink(missing_ok=True)
    progress.step(f"cluster {prefix!r} is down")


def status(paths: SimPaths) -> int:
    """Print each node's addresses, container state and whether ssh works; 0 when all are up."""
    state = ClusterState.load(paths.state_file)
    if state is None or not state.nodes:
        print(f"no sim cluster recorded in {paths.state_dir} (run: sim/sim up)")
        return 1
    engine_ok = run(["docker", "info"], check=False).returncode == 0
    print(f"cluster {state.prefix!r}  image {state.image}")
    print(f"networks: {state.prefix}-mgmt {state.mgmt_subnet}   {state.prefix}-fabric {state.fabric_subnet} (internal)")
    print(f"{'NODE':<10} {'CONTAINER':<22} {'MGMT':<15} {'FABRIC':<15} {'STATE':<10} SSH")
    healthy = engine_ok
    for node in state.nodes:
        info = container_info(node.container) if engine_ok else None
        container_state = info["State"]["Status"] if info else ("missing" if engine_ok else "no-engine")
        reachable = container_state == "running" and ssh_ok(paths, node.name)
        ssh_text = ("ok" if reachable else "FAILED") + (" (via head)" if node.role == "worker" else "")
        healthy = healthy and reachable
        print(
            f"{node.name:<10} {node.container:<22} {node.mgmt_address or '-':<15} "
            f"{node.fabric_address:<15} {container_state:<10} {ssh_text}"
        )
    return 0 if healthy else 1
