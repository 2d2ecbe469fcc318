"""Two work trees can bring their sims up at the same time: each gets its own subnets (issue 10, item 7).

Seen before the lock: a fresh clone's `make test` beside another checkout's sim, both `sim up` picked the same free
/24 pair and the second `docker network create` failed with "Pool overlaps with other one on this address space"
(87 errors). These tests create only the two networks of each cluster, against this machine's real Docker engine,
through sim/networks.py as `sim up` calls it.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waits import StreamReader

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SIM_DIR = REPO / "sim"
# The lock every checkout's `sim up` takes around picking and creating its subnets (sim/README.md).
NETWORKS_LOCK = Path("/var/lock/spark-llm-sim-networks.lock")
POOL_OVERLAPS = "Pool overlaps with other one on this address space"

# A `sim up`'s network step in a process of its own, as another work tree would run it (sim/ is on sys.path as for
# sim/sim). PATCH, when set, is run first: the retry test uses it to hide a subnet from the first pick.
ENSURE_NETWORKS = """
import json, os, sys
import host, names, networks
exec(os.environ.get("PATCH", ""))
cluster = names.ClusterNames(sys.argv[1], owner=sys.argv[2])
print(json.dumps(networks.ensure_networks(cluster, host.Progress())))
"""


def start_ensure_networks(prefix: str, patch: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(REPO / ".venv" / "bin" / "python"), "-c", ENSURE_NETWORKS, prefix, str(REPO)],
        cwd=SIM_DIR,
        env=dict(os.environ, PATCH=patch),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def network_subnet(name: str) -> str | None:
    result = subprocess.run(
        ["docker", "network", "inspect", "--format", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", name],
        capture_output=True,
        text=True,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def remove_network(name: str) -> None:
    subnet = network_subnet(name)
    subprocess.run(["docker", "network", "rm", name], capture_output=True)
    if subnet and name.endswith("-fabric"):
        subprocess.run(["ip", "route", "del", "unreachable", subnet], capture_output=True)


@pytest.fixture
def prefixes() -> Iterator[list[str]]:
    """Two cluster prefixes of this test run; their networks and fabric routes are removed afterwards."""
    names = [f"nettest-{os.getpid()}-{tag}" for tag in ("a", "b")]
    yield names
    for prefix in names:
        for network in (f"{prefix}-mgmt", f"{prefix}-fabric"):
            remove_network(network)


def test_two_sims_started_at_once_wait_for_the_lock_and_get_disjoint_subnets(prefixes: list[str]):
    """As a developer running `make test` in a fresh clone beside my checkout's sim, both sims come up: the second
    picks its subnets after the first created its networks, so neither fails with docker's overlap error."""
    fd = os.open(NETWORKS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        # Hold the lock while both start: neither may pick and create while another sim holds it.
        fcntl.flock(fd, fcntl.LOCK_EX)
        procs = [start_ensure_networks(prefix) for prefix in prefixes]
        outputs = [(StreamReader(p.stdout), StreamReader(p.stderr)) for p in procs]  # type: ignore[arg-type]
        # Each reaches the lock and says it waits for it (one that went on without it would create its networks).
        waiting = re.escape(f"waiting for {NETWORKS_LOCK}")
        for proc, (_out, err) in zip(procs, outputs, strict=True):
            err.wait_for_line(waiting, "its wait for the lock", timeout_s=60, alive=lambda p=proc: p.poll() is None)
        assert [p.poll() for p in procs] == [None, None], "a sim went on without the lock"
        assert [network_subnet(f"{prefix}-mgmt") for prefix in prefixes] == [None, None]
    finally:
        os.close(fd)
    released = time.monotonic()
    for proc in procs:
        proc.wait(timeout=120)
    elapsed = time.monotonic() - released
    results = [(out.finish(), err.finish()) for out, err in outputs]
    for proc, (_out, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert f"waiting for {NETWORKS_LOCK}" in err
    pairs = [json.loads(out) for out, _ in results]
    subnets = [ipaddress.IPv4Network(subnet) for pair in pairs for subnet in pair]
    assert all(not a.overlaps(b) for i, a in enumerate(subnets) for b in subnets[i + 1 :]), pairs
    # What docker made is what each sim recorded.
    for prefix, (mgmt, fabric) in zip(prefixes, pairs, strict=True):
        assert network_subnet(f"{prefix}-mgmt") == mgmt
        assert network_subnet(f"{prefix}-fabric") == fabric
    print(f"both sims' networks created {elapsed:.1f} s after the lock was released: {pairs}")


def test_a_subnet_taken_after_the_pick_is_skipped_for_the_next_free_pair(prefixes: list[str]):
    """As a developer whose machine also runs other docker networks (made without the sim's lock), `sim up` still
    comes up: when docker says the picked subnet overlaps, it takes the next free pair instead of failing."""
    first_free = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-c", "import networks; print(networks.pick_subnets()[0])"],
        cwd=SIM_DIR,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    foreign = f"{prefixes[1]}-mgmt"  # removed by the fixture; no sim label: someone else's network
    subprocess.run(
        ["docker", "network", "create", "--internal", "--subnet", first_free, foreign], check=True, capture_output=True
    )
    # The foreign network appears between this sim's pick and its create: the first pick does not see it.
    hide_once = (
        "import ipaddress\n"
        "seen = networks.used_subnets\n"
        "calls = []\n"
        "def used_subnets():\n"
        "    calls.append(1)\n"
        f"    hidden = ipaddress.IPv4Network({first_free!r})\n"
        "    return [s for s in seen() if len(calls) > 1 or s != hidden]\n"
        "networks.used_subnets = used_subnets\n"
    )
    proc = start_ensure_networks(prefixes[0], patch=hide_once)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert POOL_OVERLAPS in err and "trying the next free pair" in err, err
    mgmt, fabric = json.loads(out)
    assert mgmt != first_free
    assert network_subnet(f"{prefixes[0]}-mgmt") == mgmt
    assert network_subnet(f"{prefixes[0]}-fabric") == fabric
