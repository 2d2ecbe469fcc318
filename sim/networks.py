"""The sim's two docker networks (mgmt, fabric): the first free /24 pair, picked and created under a machine-wide lock.

Every work tree's sim on this machine takes the same lock, so a developer's checkout and a fresh clone can bring
their clusters up side by side.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from host import Progress, SimError, docker, run
from names import ClusterNames

# Subnets come from these ranges: mgmt 172.28.<n>.0/24, fabric 172.29.<n>.0/24, first free n.
MGMT_SUBNET_FORMAT = "172.28.{}.0/24"
FABRIC_SUBNET_FORMAT = "172.29.{}.0/24"

# One path every checkout agrees on (as sim/node-image.sh's build lock); /var/lock is /run/lock on Debian.
NETWORKS_LOCK = "/var/lock/spark-llm-sim-networks.lock"
LOCK_TIMEOUT_S = 120.0
# What `docker network create` says when the subnet is taken (moby's libnetwork/ipam).
POOL_OVERLAPS = "Pool overlaps with other one on this address space"
CREATE_ATTEMPTS = 8


def used_subnets() -> list[ipaddress.IPv4Network]:
    """Subnets already taken on this machine: docker networks and host routes."""
    taken: list[ipaddress.IPv4Network] = []
    network_ids = docker("network", "ls", "--quiet").split()
    if network_ids:
        configs = docker("network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}} {{end}}", *network_ids)
        for subnet in configs.split():
            try:
                taken.append(ipaddress.IPv4Network(subnet, strict=False))
            except ValueError:
                continue  # an IPv6 subnet
    for line in run(["ip", "-4", "route", "show"]).stdout.splitlines():
        words = line.split()
        destination = (
            words[1]
            if words and words[0] in {"unreachable", "blackhole", "prohibit"}
            else (words[0] if words else "default")
        )
        if destination != "default":
            taken.append(ipaddress.IPv4Network(destination, strict=False))
    return taken


# Each node's fixed host number on the sim's /24s: the head .10, worker-N .10+N. Fixed, as a real cluster's are: a
# node restarted keeps its address, so two nodes restarted at once cannot swap them (issue 31, 12), and the stack
# file's addresses and pinned host keys stay true.
FIRST_HOST = 10


def node_address(subnet: str, node: str) -> str:
    """Pure: `node`'s fixed address on `subnet` (head, or worker-N for N up to 240)."""
    index = 0 if node == "head" else int(node.removeprefix("worker-"))
    network = ipaddress.IPv4Network(subnet, strict=False)
    if not 0 <= index <= network.num_addresses - FIRST_HOST - 2:
        raise SimError(f"{node}: no fixed address for it on {subnet}")
    return str(network.network_address + FIRST_HOST + index)


def pick_subnets() -> tuple[str, str]:
    taken = used_subnets()
    for index in range(256):
        mgmt = ipaddress.IPv4Network(MGMT_SUBNET_FORMAT.format(index))
        fabric = ipaddress.IPv4Network(FABRIC_SUBNET_FORMAT.format(index))
        if not any(mgmt.overlaps(t) or fabric.overlaps(t) for t in taken):
            return str(mgmt), str(fabric)
    raise SimError("no free /24 pair left in 172.28.0.0/16 and 172.29.0.0/16 for the sim networks")


def network_subnet(name: str) -> str | None:
    result = run(
        ["docker", "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", name],
        check=False,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def network_labels(name: str) -> dict[str, str] | None:
    result = run(["docker", "network", "inspect", "--format", "{{json .Labels}}", name], check=False)
    return json.loads(result.stdout) if result.returncode == 0 else None


def ensure_networks(names: ClusterNames, progress: Progress) -> tuple[str, str]:
    """The cluster's mgmt and fabric networks: reused when they exist, else created on the first free pair."""
    mgmt_subnet = network_subnet(names.mgmt_network)
    fabric_subnet = network_subnet(names.fabric_network)
    for network, subnet in ((names.mgmt_network, mgmt_subnet), (names.fabric_network, fabric_subnet)):
        if subnet:
            names.check_owned(f"network {network}", network_labels(network))
    if mgmt_subnet and fabric_subnet:
        progress.step(
            f"reusing networks {names.mgmt_network} ({mgmt_subnet}), {names.fabric_network} ({fabric_subnet})"
        )
        block_fabric_route(fabric_subnet)
        return mgmt_subnet, fabric_subnet
    with networks_lock(progress):
        return create_networks(names, progress)


@contextmanager
def networks_lock(progress: Progress, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold the machine-wide lock every work tree's `sim up` takes to pick and create its subnets.

    Two sims started at once would otherwise both pick the same free pair, and the second `docker network create`
    fails with "Pool overlaps with other one on this address space". The descriptor is not inheritable (PEP 446),
    so no docker CLI or dockerd started meanwhile keeps the lock; it is held for a few docker calls only.
    """
    fd = os.open(NETWORKS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise SimError(
                        f"gave up after {timeout_s:.0f}s waiting for {NETWORKS_LOCK}: another `sim up` on this machine"
                        f" holds it while it creates its networks; `fuser -v {NETWORKS_LOCK}` names it. Retry once it"
                        " is done"
                    ) from None
                if not announced:
                    progress.step(f"waiting for {NETWORKS_LOCK}: another sim is creating its networks")
                    announced = True
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)  # releases the lock


def create_networks(names: ClusterNames, progress: Progress) -> tuple[str, str]:
    """Create the missing networks on the first free pair; on an overlap (a network made outside the lock since the
    pick) remove what this attempt created and take the next free pair."""
    for _attempt in range(CREATE_ATTEMPTS):
        mgmt_subnet = network_subnet(names.mgmt_network)
        fabric_subnet = network_subnet(names.fabric_network)
        new_mgmt, new_fabric = pick_subnets()
        created: list[str] = []
        trying = new_mgmt
        try:
            if not mgmt_subnet:
                mgmt_subnet = new_mgmt
                progress.step(f"creating network {names.mgmt_network} ({mgmt_subnet})")
                # --internal: the host reaches the head on this bridge, but nothing in the sim can
                # route past the host (no registry pulls or stray traffic leaving this machine).
                docker("network", "create", "--internal", "--subnet", mgmt_subnet, *names.labels(), names.mgmt_network)
                created.append(names.mgmt_network)
            if not fabric_subnet:
                fabric_subnet = trying = new_fabric
                progress.step(f"creating network {names.fabric_network} ({fabric_subnet}, internal)")
                # inhibit_ipv4: the host gets no address on the fabric, so it cannot talk to the workers
                # directly (an internal bridge still gives the host an address on it).
                docker(
                    "network",
                    "create",
                    "--internal",
                    "--subnet",
                    fabric_subnet,
                    *names.labels(),
                    "--opt",
                    "com.docker.network.bridge.inhibit_ipv4=true",
                    names.fabric_network,
                )
        except SimError as exc:
            if POOL_OVERLAPS not in str(exc):
                raise
            progress.step(f"{trying} was taken meanwhile (docker: {POOL_OVERLAPS}); trying the next free pair")
            for network in created:
                docker("network", "rm", network)
            continue
        block_fabric_route(fabric_subnet)
        return mgmt_subnet, fabric_subnet
    raise SimError(
        f"docker refused {CREATE_ATTEMPTS} subnet pairs in a row ({POOL_OVERLAPS!r}): something else keeps creating"
        " networks in 172.28.0.0/16 or 172.29.0.0/16; `docker network ls` shows them. Retry `sim up` once it stops"
    )


def block_fabric_route(fabric_subnet: str) -> None:
    """Make the fabric unreachable from the host: without this route, packets to it would
    follow the host's default route off this machine."""
    run(["ip", "route", "replace", "unreachable", fabric_subnet])


def unblock_fabric_route(fabric_subnet: str) -> None:
    run(["ip", "route", "del", "unreachable", fabric_subnet], check=False)
