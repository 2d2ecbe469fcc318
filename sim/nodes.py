"""Node lifecycle: each node's docker-in-docker container and volume (created, started, recreated, removed), a
same-named cluster a gone work tree left behind, and what `up` reads back from a node once it is ready."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from host import Progress, SimError, docker, run, wait_until
from names import LABEL_CLUSTER, LABEL_REPO, ClusterNames
from networks import network_subnet, node_address, unblock_fabric_route
from state import ClusterState, Node

# docker-in-docker without --privileged, which fails in this sandbox with
# "unable to apply caps: operation not permitted" (CAP_SYS_RESOURCE is withheld).
NODE_RUN_OPTIONS = (
    "--cap-add=ALL",
    "--cap-drop=SYS_RESOURCE",
    "--security-opt=seccomp=unconfined",
    "--security-opt=apparmor=unconfined",
    "--device-cgroup-rule=a *:* rwm",
    "--cgroupns=host",
    "--volume=/sys/fs/cgroup:/sys/fs/cgroup:rw",
    # A fresh /run on every start: no stale pid files or sockets after a restart.
    "--tmpfs=/run",
)

NODE_READY_TIMEOUT_S = 120


def container_info(container: str) -> dict | None:
    result = run(["docker", "container", "inspect", container], check=False)
    if result.returncode != 0:
        return None
    return json.loads(result.stdout)[0]


def cluster_containers(names: ClusterNames) -> list[str]:
    return docker("ps", "--all", *names.filters(), "--format", "{{.Names}}").split()


def fixed_addresses(names: ClusterNames, node: str, role: str) -> dict[str, str]:
    """The node's network -> its fixed address (sim/networks.node_address): the fabric, and mgmt for the head."""
    networks = [names.mgmt_network, names.fabric_network] if role == "head" else [names.fabric_network]
    addresses = {}
    for network in networks:
        subnet = network_subnet(network)
        if not subnet:
            raise SimError(f"network {network} has no subnet; run `sim down` and `sim up` again")
        addresses[network] = node_address(subnet, node)
    return addresses


def pinned_addresses(info: dict) -> dict[str, str]:
    """A node container's network -> the address it was created with (empty when Docker picked one)."""
    networks = info.get("NetworkSettings", {}).get("Networks") or {}
    return {name: ((net.get("IPAMConfig") or {}).get("IPv4Address") or "") for name, net in networks.items()}


def create_node(names: ClusterNames, node: str, role: str, image: str) -> None:
    container = names.container(node)
    volume = names.volume(node)
    labels = names.labels(node)
    addresses = fixed_addresses(names, node, role)
    docker("volume", "create", *labels, volume)
    first_network, *more = addresses
    docker(
        "create",
        "--name",
        container,
        "--hostname",
        node,
        *labels,
        "--network",
        first_network,
        "--ip",
        addresses[first_network],
        *NODE_RUN_OPTIONS,
        "--volume",
        f"{volume}:/var/lib/docker",
        image,
    )
    for network in more:
        docker("network", "connect", "--ip", addresses[network], network, container)
    docker("start", container)


def remove_node(names: ClusterNames, node: str, keep_volume: bool = False) -> None:
    """The node's container, and its volume (its own Docker engine's images and containers) unless kept."""
    if keep_volume:
        docker("rm", "--force", names.container(node), check=False)
        return
    docker("rm", "--force", "--volumes", names.container(node), check=False)
    docker("volume", "rm", "--force", names.volume(node), check=False)


def ensure_node(names: ClusterNames, node: str, role: str, image: str, progress: Progress) -> None:
    container = names.container(node)
    info = container_info(container)
    if info is not None:
        names.check_owned(f"container {container}", info["Config"]["Labels"])
    if info is not None and info["Config"]["Image"] != image:
        progress.step(f"{container}: image changed ({info['Config']['Image']} -> {image}), recreating")
        remove_node(names, node)
        info = None
    elif info is not None and pinned_addresses(info) != fixed_addresses(names, node, role):
        # Made by an older sim, with addresses Docker picked: recreated with fixed ones, its engine's volume kept.
        progress.step(f"{container}: recreating with fixed addresses {fixed_addresses(names, node, role)}")
        remove_node(names, node, keep_volume=True)
        info = None
    if info is None:
        progress.step(f"{container}: creating")
        create_node(names, node, role, image)
    elif not info["State"]["Running"]:
        progress.step(f"{container}: starting (was {info['State']['Status']})")
        docker("start", container)
    else:
        progress.step(f"{container}: running, kept")


def owner_is_live(owner: str, prefix: str) -> bool:
    """A work tree still has this cluster when its .sim/state.json records the prefix."""
    state = ClusterState.load(Path(owner) / ".sim" / "state.json")
    return state is not None and state.prefix == prefix


def reclaim_orphans(names: ClusterNames, progress: Progress) -> None:
    """Remove a same-prefix cluster left by a work tree that no longer records it (deleted folder, lost
    .sim/); refuse when that work tree still has it, so two work trees never share or break one cluster."""
    label = ["--filter", f"label={LABEL_CLUSTER}={names.prefix}"]
    owners: dict[str, dict[str, list[str]]] = {}
    for kind, listing in (
        ("container", ["ps", "--all", *label, "--format", '{{.Names}} {{.Label "' + LABEL_REPO + '"}}']),
        ("network", ["network", "ls", *label, "--format", '{{.Name}} {{.Label "' + LABEL_REPO + '"}}']),
        ("volume", ["volume", "ls", *label, "--format", '{{.Name}} {{.Label "' + LABEL_REPO + '"}}']),
    ):
        for line in docker(*listing).splitlines():
            name, _, owner = line.partition(" ")
            if owner != names.owner:
                owners.setdefault(owner, {}).setdefault(kind, []).append(name)
    for owner, objects in owners.items():
        if owner and owner_is_live(owner, names.prefix):
            raise SimError(
                f"the sim of {owner} runs a cluster named {names.prefix!r}; "
                "use `sim up --name OTHER-PREFIX` here, or `sim down` there"
            )
        progress.step(f"removing the orphaned {names.prefix!r} cluster of {owner or 'an unknown work tree'}")
        if objects.get("container"):
            docker("rm", "--force", "--volumes", *objects["container"])
        for network in objects.get("network", []):
            subnet = network_subnet(network)
            docker("network", "rm", network)
            if network == names.fabric_network and subnet:
                unblock_fabric_route(subnet)
        if objects.get("volume"):
            docker("volume", "rm", "--force", *objects["volume"])


def exec_ok(container: str, *cmd: str) -> bool:
    return run(["docker", "exec", container, *cmd], check=False).returncode == 0


def wait_for_node(container: str) -> None:
    """Wait until the node's sshd made its host keys and its own Docker engine answers."""
    wait_until(
        f"{container}'s host key and its inner `docker info`",
        lambda: (
            exec_ok(container, "test", "-s", "/etc/ssh/ssh_host_ed25519_key.pub")
            and exec_ok(container, "docker", "info")
        ),
        NODE_READY_TIMEOUT_S,
    )


def read_node(names: ClusterNames, node: str, role: str) -> Node:
    container = names.container(node)
    info = container_info(container)
    if info is None:
        raise SimError(f"{container} disappeared")
    networks = info["NetworkSettings"]["Networks"]
    fabric = networks.get(names.fabric_network, {}).get("IPAddress")
    mgmt = networks.get(names.mgmt_network, {}).get("IPAddress") if role == "head" else None
    if not fabric or (role == "head" and not mgmt):
        raise SimError(f"{container} has no address on its networks: {sorted(networks)}")
    # The host key is read from the container itself, not learned over the network.
    key_line = docker("exec", container, "cat", "/etc/ssh/ssh_host_ed25519_key.pub").split()
    return Node(
        name=node,
        role=role,
        container=container,
        fabric_address=fabric,
        host_key=" ".join(key_line[:2]),
        mgmt_address=mgmt,
    )


# What `spark-llm preflight` reads to report "no GPU: simulated node" instead of a missing driver.
SIM_MARKER = "/etc/spark-llm/simulated-node"


def mark_simulated(nodes: Sequence[Node], prefix: str) -> None:
    """Leave SIM_MARKER on every node: this node has no GPU on purpose."""
    for node in nodes:
        docker(
            "exec",
            "-i",
            node.container,
            "sh",
            "-c",
            f"mkdir -p {SIM_MARKER.rsplit('/', 1)[0]} && cat > {SIM_MARKER}",
            stdin_text=f"simulated node {node.name} of sim cluster {prefix} (sim/sim): no GPU, no NVIDIA driver\n",
        )
