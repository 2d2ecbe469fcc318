"""The simulated dual-Spark cluster: docker-in-docker nodes on a management and a fabric network.

A head node sits on both networks (the operator reaches it on mgmt), workers sit on the internal
fabric network only and are reached through the head as an SSH jump host, as on the real Sparks.
State (keys, host keys, addresses) lives in <repo>/.sim/; `up` also writes <repo>/Pulumi.sim.yaml.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from host import Progress, SimError, docker, run, wait_until
from networks import ensure_networks, network_labels, network_subnet, unblock_fabric_route

SIM_DIR = Path(__file__).resolve().parent
REPO_DIR = SIM_DIR.parent

# Where a sim keeps its state (.sim/) and writes its stack file (Pulumi.sim.yaml): the work tree, unless this
# variable names another directory. The test bed runs one sim per pytest-xdist worker, each in a home of its own.
SIM_HOME_ENV = "SPARK_LLM_SIM_HOME"


def default_prefix(home: Path) -> str:
    """One cluster per sim home by default: a clone (CI's, say) never collides with a cluster another checkout, or
    another test worker, left behind. Node host names (head, worker-N) do not depend on it."""
    return "spark-llm-" + hashlib.sha256(str(home).encode()).hexdigest()[:6]


DEFAULT_WORKERS = 1
PREFIX_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,30}$")

LABEL_CLUSTER = "spark-llm.sim.cluster"
LABEL_NODE = "spark-llm.sim.node"
# The repository whose .sim/ owns a cluster: another work tree on this machine must not adopt it.
LABEL_REPO = "spark-llm.sim.repo"

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
SSH_READY_TIMEOUT_S = 60
SSH_CONNECT_TIMEOUT_S = 5

STACK_HEADER = (
    "# Written by `sim up` (sim/sim) for the simulated cluster; do not edit: it is rewritten on\n"
    "# every `sim up` and removed by `sim down`. Shared defaults come from sim/stack-defaults.yaml.\n"
)


@dataclass(frozen=True)
class SimPaths:
    """Where the sim keeps its state and writes its outputs for one repository (in `home`: the work tree unless
    $SPARK_LLM_SIM_HOME says otherwise)."""

    repo: Path
    home: Path

    @property
    def state_dir(self) -> Path:
        return self.home / ".sim"

    @property
    def operator_key(self) -> Path:
        return self.state_dir / "id_ed25519"

    @property
    def fabric_key(self) -> Path:
        return self.state_dir / "fabric_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.state_dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.state_dir / "ssh_config"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def stack_file(self) -> Path:
        return self.home / "Pulumi.sim.yaml"

    @property
    def stack_defaults(self) -> Path:
        return self.repo / "sim" / "stack-defaults.yaml"


@dataclass(frozen=True)
class ClusterNames:
    """Docker object names and labels of one cluster: names from its prefix, owner is its repository."""

    prefix: str
    owner: str

    def labels(self, node: str | None = None) -> list[str]:
        labels = ["--label", f"{LABEL_CLUSTER}={self.prefix}", "--label", f"{LABEL_REPO}={self.owner}"]
        return labels + (["--label", f"{LABEL_NODE}={node}"] if node else [])

    def filters(self) -> list[str]:
        return ["--filter", f"label={LABEL_CLUSTER}={self.prefix}", "--filter", f"label={LABEL_REPO}={self.owner}"]

    def check_owned(self, what: str, labels: dict[str, str] | None) -> None:
        """Refuse to touch a same-named object that another work tree's sim (or anything else) made."""
        owner = (labels or {}).get(LABEL_REPO)
        if owner != self.owner:
            made_by = f"the sim of {owner}" if owner else "something other than sim/sim"
            raise SimError(f"{what} exists but was made by {made_by}; use `sim up --name OTHER-PREFIX`")

    @property
    def mgmt_network(self) -> str:
        return f"{self.prefix}-mgmt"

    @property
    def fabric_network(self) -> str:
        return f"{self.prefix}-fabric"

    def container(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def volume(self, node: str) -> str:
        return f"{self.prefix}-{node}-docker"


@dataclass
class Node:
    """One sim node as the stack file and `status` see it."""

    name: str
    role: str
    container: str
    fabric_address: str
    host_key: str
    mgmt_address: str | None = None

    @property
    def ssh_host(self) -> str:
        """The address the operator's ssh connects to (through the head for a worker)."""
        return self.mgmt_address if self.role == "head" else self.fabric_address


@dataclass
class ClusterState:
    """What `up` recorded in .sim/state.json, read by `status` and `down`."""

    prefix: str
    image: str = ""
    mgmt_subnet: str = ""
    fabric_subnet: str = ""
    nodes: list[Node] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> ClusterState | None:
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        nodes = [Node(**node) for node in raw.pop("nodes", [])]
        return cls(nodes=nodes, **raw)

    def save(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @property
    def workers(self) -> list[Node]:
        return [node for node in self.nodes if node.role == "worker"]


# ---------------------------------------------------------------------------------------------
# Engine, image, keys


def ensure_engine(progress: Progress) -> None:
    progress.step("ensuring the Docker engine runs (sim/docker-engine.sh)")
    subprocess.run([str(SIM_DIR / "docker-engine.sh"), "ensure"], check=True)


def ensure_node_image(progress: Progress) -> str:
    progress.step("ensuring the node image (sim/node-image.sh; a cold build takes about a minute)")
    result = subprocess.run([str(SIM_DIR / "node-image.sh"), "ensure"], check=True, stdout=subprocess.PIPE, text=True)
    return result.stdout.strip().splitlines()[-1]


def ensure_keypair(path: Path, comment: str) -> None:
    if path.exists() and path.with_suffix(".pub").exists():
        return
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    path.chmod(0o600)


# ---------------------------------------------------------------------------------------------
# Nodes


def container_info(container: str) -> dict | None:
    result = run(["docker", "container", "inspect", container], check=False)
    if result.returncode != 0:
        return None
    return json.loads(result.stdout)[0]


def cluster_containers(names: ClusterNames) -> list[str]:
    return docker("ps", "--all", *names.filters(), "--format", "{{.Names}}").split()


def create_node(names: ClusterNames, node: str, role: str, image: str) -> None:
    container = names.container(node)
    volume = names.volume(node)
    labels = names.labels(node)
    docker("volume", "create", *labels, volume)
    first_network = names.mgmt_network if role == "head" else names.fabric_network
    docker(
        "create",
        "--name",
        container,
        "--hostname",
        node,
        *labels,
        "--network",
        first_network,
        *NODE_RUN_OPTIONS,
        "--volume",
        f"{volume}:/var/lib/docker",
        image,
    )
    if role == "head":
        docker("network", "connect", names.fabric_network, container)
    docker("start", container)


def remove_node(names: ClusterNames, node: str) -> None:
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


# ---------------------------------------------------------------------------------------------
# SSH material


def known_hosts_text(nodes: Sequence[Node], *, include_mgmt: bool) -> str:
    lines = []
    for node in nodes:
        hosts = [node.name]
        if include_mgmt and node.mgmt_address:
            hosts.append(node.mgmt_address)
        hosts.append(node.fabric_address)
        lines.append(f"{','.join(hosts)} {node.host_key}")
    return "\n".join(lines) + "\n"


def ssh_config_text(paths: SimPaths, nodes: Sequence[Node]) -> str:
    blocks = ["# Written by `sim up`; do not edit. Usage: ssh -F .sim/ssh_config head|worker-N\n"]
    for node in nodes:
        block = f"Host {node.name}\n  HostName {node.ssh_host}\n"
        if node.role == "worker":
            block += "  ProxyJump head\n"
        blocks.append(block)
    blocks.append(
        "Host *\n"
        "  User root\n"
        "  Port 22\n"
        f"  IdentityFile {paths.operator_key}\n"
        "  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {paths.known_hosts}\n"
        "  StrictHostKeyChecking yes\n"
    )
    return "\n".join(blocks)


def write_private(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.chmod(0o600)
    tmp.replace(path)


def install_node_ssh(paths: SimPaths, nodes: Sequence[Node]) -> None:
    """Give every node the operator's and the fabric key as authorized keys, the fabric key as its
    own identity (node-to-node ssh, as between the real Sparks) and the nodes' pinned host keys."""
    authorized = paths.operator_key.with_suffix(".pub").read_text() + paths.fabric_key.with_suffix(".pub").read_text()
    files = {
        "authorized_keys": authorized,
        "id_ed25519": paths.fabric_key.read_text(),
        "id_ed25519.pub": paths.fabric_key.with_suffix(".pub").read_text(),
        "known_hosts": known_hosts_text(nodes, include_mgmt=False),
    }
    for node in nodes:
        for name, text in files.items():
            docker(
                "exec",
                "-i",
                node.container,
                "sh",
                "-c",
                f"umask 077 && mkdir -p /root/.ssh && cat > /root/.ssh/{name}.tmp"
                f" && mv /root/.ssh/{name}.tmp /root/.ssh/{name}",
                stdin_text=text,
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


def ssh_command(paths: SimPaths, node: str, *remote: str) -> list[str]:
    return [
        "ssh",
        "-F",
        str(paths.ssh_config),
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={SSH_CONNECT_TIMEOUT_S}",
        node,
        *remote,
    ]


def ssh_ok(paths: SimPaths, node: str) -> bool:
    return run(ssh_command(paths, node, "true"), check=False, timeout=30).returncode == 0


# ---------------------------------------------------------------------------------------------
# Stack file


class _Quoted(str):
    """A string the stack file writes in double quotes (host keys, as in the documented shape)."""


class _StackDumper(yaml.SafeDumper):
    pass


_StackDumper.add_representer(
    _Quoted, lambda dumper, data: dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style='"')
)


def load_stack_defaults(path: Path) -> dict:
    """Keys of sim/stack-defaults.yaml: a mapping of config keys (or one `config:` mapping of them)."""
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    if isinstance(data, dict) and set(data) == {"config"}:
        data = data["config"] or {}
    if not isinstance(data, dict):
        raise SimError(f"{path}: expected a mapping of config keys, e.g. 'spark-llm:engine: vllm'")
    return data


def node_config(node: Node) -> dict:
    entry: dict = {
        "name": node.name,
        "role": node.role,
        "host": node.ssh_host,
        "port": 22,
        "user": "root",
        "fabricAddress": node.fabric_address,
    }
    if node.role == "worker":
        entry["via"] = "head"
    entry["hostKey"] = _Quoted(node.host_key)
    return entry


def stack_text(paths: SimPaths, nodes: Sequence[Node]) -> str:
    config = {
        "spark-llm:sshKeyPath": str(paths.operator_key),
        "spark-llm:nodes": [node_config(node) for node in nodes],
    }
    for key, value in load_stack_defaults(paths.stack_defaults).items():
        config.setdefault(key, value)
    document: dict = {}
    # Keep what Pulumi itself stores in the stack file (encryptionsalt, secretsprovider, ...).
    if paths.stack_file.exists():
        existing = yaml.safe_load(paths.stack_file.read_text()) or {}
        if isinstance(existing, dict):
            document.update((key, value) for key, value in existing.items() if key != "config")
    document["config"] = config
    return STACK_HEADER + yaml.dump(document, Dumper=_StackDumper, sort_keys=False, default_flow_style=False)


# ---------------------------------------------------------------------------------------------
# up / down / status


def _check_prefix(prefix: str) -> None:
    if not PREFIX_PATTERN.match(prefix):
        raise SimError(f"--name {prefix!r}: use lowercase letters, digits and '-', e.g. 'spark-llm'")


def up(
    paths: SimPaths,
    *,
    workers: int | None,
    prefix: str | None,
    load_image: Path | None,
    load_on: str = "head",
    image_tag: str | None = None,
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
    _check_prefix(prefix)
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

    for node, role in wanted:
        ensure_node(names, node, role, image, progress)
    for node, _ in wanted:
        progress.step(f"{names.container(node)}: waiting for sshd host key and inner docker engine")
        wait_for_node(names.container(node))

    nodes = [read_node(names, node, role) for node, role in wanted]
    state.nodes = nodes
    state.save(paths.state_file)

    progress.step("installing keys and pinned host keys (.sim/known_hosts, .sim/ssh_config)")
    install_node_ssh(paths, nodes)
    mark_simulated(nodes, prefix)
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
        # "head": as if the head had pulled it (the program moves it to the workers); "all": already everywhere.
        targets = [n for n in nodes if load_on == "all" or n.role == "head"]
        for node in targets:
            progress.step(f"loading {load_image} into {node.name}'s engine")
            result = run(["docker", "exec", "-i", names.container(node.name), "docker", "load"], stdin_file=load_image)
            loaded = result.stdout.strip().rsplit("Loaded image: ", 1)[-1].strip()
            if image_tag:
                docker("exec", names.container(node.name), "docker", "tag", loaded, image_tag)
            progress.step(f"{node.name}: {loaded}" + (f" (tagged {image_tag})" if image_tag else ""))

    progress.step(f"writing {paths.stack_file}")
    tmp = paths.stack_file.with_suffix(".yaml.tmp")
    tmp.write_text(stack_text(paths, nodes))
    tmp.replace(paths.stack_file)
    progress.step(f"cluster {prefix!r} is up: head + {workers} worker(s)")
    return state


def down(paths: SimPaths, *, prefix: str | None) -> None:
    progress = Progress()
    state = ClusterState.load(paths.state_file)
    prefix = prefix or (state.prefix if state else default_prefix(paths.home))
    _check_prefix(prefix)
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


def repo_paths() -> SimPaths:
    home = os.environ.get(SIM_HOME_ENV)
    return SimPaths(repo=REPO_DIR, home=Path(home).resolve() if home else REPO_DIR)


def fabric_interface(container: str, address: str) -> str:
    """The node's interface that holds its fabric address."""
    out = docker("exec", container, "ip", "-o", "-4", "addr", "show", "to", address).split()
    if len(out) < 2:
        raise SimError(f"{container} has no interface with {address}")
    return out[1]


def link(paths: SimPaths, rate_mbit: int | None, nodes: Sequence[str] = ()) -> None:
    """Cap (rate_mbit) or uncap (None) the egress of each node's fabric interface with `tc tbf`.

    The sim's links are one host's bridge: a cap per sending interface makes link-bound effects (a head's uplink
    shared by several copies) show as they would on real cables.
    """
    state = ClusterState.load(paths.state_file)
    if state is None or not state.nodes:
        raise SimError(f"no sim cluster recorded in {paths.state_dir} (run: sim/sim up)")
    for node in state.nodes:
        if nodes and node.name not in nodes:
            continue
        dev = fabric_interface(node.container, node.fabric_address)
        docker("exec", node.container, "tc", "qdisc", "del", "dev", dev, "root", check=False)
        if rate_mbit is not None:
            # burst: 10 ms at this rate, and never below 256 KiB: a veth hands tbf 64 KiB GSO segments, and a
            # bucket smaller than a few of them makes tbf split each one in software, which costs more CPU than
            # the copy it shapes (measured: rsync's CPU x3 at 400 Mbit/s with a 50 KiB burst).
            burst = max(256 << 10, rate_mbit * 1_000_000 // 8 // 100)
            docker(
                "exec", node.container, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
                "rate", f"{rate_mbit}mbit", "burst", str(burst), "latency", "100ms",
            )  # fmt: skip
        print(f"{node.name} {dev}: " + (f"egress capped at {rate_mbit} Mbit/s" if rate_mbit else "uncapped"))
