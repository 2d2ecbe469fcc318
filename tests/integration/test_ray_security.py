"""Ray is locked: with vLLM on Ray, only a holder of the stack's Ray token gets into the Ray cluster.

User story: an operator deploys the vLLM + Ray profile (what finally worked in the seeds). Ray's gRPC servers (the
GCS on 6379, each raylet, each worker process) listen on every address of a node, whatever `--node-ip-address`
says: Ray 2.60 has no option to bind them to one. So the program turns Ray's token authentication on, with a token
made once per stack and kept as a secret in state, delivered to every node as a 0600 file (RAY_AUTH_TOKEN_PATH).

On the sim, after `pulumi up` serves:
- from the management network (the operator's side: a container on the sim's mgmt network with the stand-in image,
  which has Ray 2.60), `ray start --address=HEAD:6379` cannot join the cluster and `ray.init(address=...)` cannot
  connect a driver to submit work: the head's Ray refuses both for want of the token; and every Ray server that
  listens on every address of the head (GCS, both raylet servers, each worker process), called from this machine
  without the token, answers UNAUTHENTICATED;
- on the fabric, where Ray is meant to be reached, a process without the token is refused the same way, and with
  the token it is answered (so the token is what refuses, not the network); the cluster still has its two nodes;
- the group still serves a completion; a second `up` keeps the token (nothing to change, nothing restarts);
- the token is on no command line (this machine's, sampled through `up`, and each node's), in no container's
  configuration, in no `pulumi up` output, in `pulumi stack export` or the state files only encrypted, in no file
  others may read on a node; its files are 0600.

Then the doors on the management network closed (spark-llm:network.firewall): while it is off, `pulumi preview` warns
that the head's group ports can be reached beyond the fabric; with `fabric-only`, `pulumi up` installs one nftables
table of spark-llm's own on each node (Docker's tables untouched, no engine restarted) and every port the group
listens on at the head's management side (Ray's GCS, raylet, workers, the rendezvous among the random ports) refuses a
connection from this machine, while the API still answers, ssh still reaches every node and Ray still answers a token
holder on the fabric; `pulumi destroy` leaves no table behind.

And the heat bounded beside the doors (issue 42, 5): worker-1's GPU SM clock capped (spark-llm:nodes[].smClockCapMhz)
is a change preview shows, applied by the same `up` (no engine restarted), read back on the node; lifted there by
hand (`nvidia-smi -rgc`) it is drift to preview and to `spark-llm status`, and `pulumi up` applies it again;
`pulumi destroy` removes it.
"""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import SimCluster, complete, run, tcp_connect
from tests.integration.profiles import use_profile
from tests.integration.secrets_scan import NODES, ArgvSampler, files_others_read
from tests.integration.test_ops import SparkLlm

pytestmark = pytest.mark.integration

TOKEN_FILE = "/root/spark-llm/ray-token"
REFUSED = "InvalidAuthToken: Authentication token is missing or incorrect"
# Ray retries a refused GCS connection once a second, 20 times by default: two are enough to see the refusal.
FEW_RETRIES = "RAY_NUM_REDIS_GET_RETRIES=2"
# A client whose connection the firewall rejects waits out Ray's connect timeouts, 41 s in all with the defaults
# (GCS 5 s, its pubsub 5 s, the Python client 30 s): a second each still tells a door that is shut.
SHUT_DOOR_TIMEOUTS = ("RAY_gcs_rpc_server_connect_timeout_s=1", "RAY_py_gcs_connect_timeout_s=1")


def image_tag(tarball: Path) -> str:
    """The stand-in image's tag as `docker save` recorded it (build-image.sh leaves it in this machine's docker)."""
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("manifest.json")
        assert member is not None
        return json.load(member)[0]["RepoTags"][0]


@pytest.fixture(scope="module")
def probe_image(standin_image: Path) -> str:
    tag = image_tag(standin_image)
    if run(["docker", "image", "inspect", tag], check=False).returncode != 0:
        run(["docker", "load", "-i", str(standin_image)], timeout=600)
    return tag


def ray_probe(
    sim: SimCluster,
    image: str,
    network: str,
    script: str,
    token_file: Path | None = None,
    env: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """`script` (sh) in a throwaway container with Ray, attached to one of the sim's networks only."""
    cmd = ["docker", "run", "--rm", "--name", f"{sim.prefix}-ray-probe-{uuid.uuid4().hex[:8]}"]
    cmd += ["--network", f"{sim.prefix}-{network}", "-e", FEW_RETRIES, "--entrypoint", "sh"]
    for assignment in env:
        cmd += ["-e", assignment]
    if token_file is not None:
        # As the engine containers get it: a read-only file named by RAY_AUTH_TOKEN_PATH.
        cmd += ["-v", f"{token_file}:/probe/ray-token:ro", "-e", "RAY_AUTH_MODE=token"]
        cmd += ["-e", "RAY_AUTH_TOKEN_PATH=/probe/ray-token"]
    return run([*cmd, image, "-c", script], check=False, timeout=180)


def refused(result: subprocess.CompletedProcess[str]) -> bool:
    return result.returncode != 0 and REFUSED in result.stdout + result.stderr


# One gRPC method of each kind of Ray server: a call without the token is answered UNAUTHENTICATED (16) by the
# server that has the service, UNIMPLEMENTED (12) by the others; OK (0) would be a server answering anyone.
RAY_METHODS = (
    "ray.rpc.NodeInfoGcsService/GetAllNodeInfo",
    "ray.rpc.NodeManagerService/GetNodeStats",
    "ray.rpc.ObjectManagerService/Pull",
    "ray.rpc.CoreWorkerService/GetCoreWorkerStats",
)


def ray_wildcard_listeners(sim: SimCluster, node: str) -> dict[int, str]:
    """The ports a Ray process (GCS, raylet, `ray::` worker) listens on at every address of the node, by process."""
    found = {}
    for line in sim.node_exec(node, "ss", "-Hltnp").stdout.splitlines():
        fields = line.split()
        process = re.search(r'\(\("([^"]+)"', fields[-1])
        if fields[3].startswith("0.0.0.0:") and process and re.match(r"gcs_server$|raylet$|ray::", process[1]):
            found[int(fields[3].rsplit(":", 1)[1])] = process[1]
    return found


def grpc_status(address: str, port: int, method: str, empty_message: Path) -> str:
    """The grpc-status of one unauthenticated call from here (curl speaks gRPC's HTTP/2 framing)."""
    cmd = ["curl", "-sS", "-m", "5", "--http2-prior-knowledge", "-o", "/dev/null", "-D", "-", "-X", "POST"]
    cmd += ["-H", "content-type: application/grpc", "-H", "te: trailers", "--data-binary", f"@{empty_message}"]
    headers = run([*cmd, f"http://{address}:{port}/{method}"], check=False, timeout=30).stdout
    found = re.search(r"^grpc-status: (\d+)", headers, re.M | re.I)
    return found[1] if found else f"no gRPC answer: {headers.strip()[:80]!r}"


def test_only_the_stacks_token_gets_into_the_ray_cluster_and_the_group_still_serves(
    pulumi, sim_cluster, probe_image, tmp_path
):
    use_profile(pulumi, "vllm-ray")
    with ArgvSampler() as sampler:
        up = pulumi.up()
    outputs = pulumi.outputs()
    assert complete(outputs)["usage"]["completion_tokens"] == 4

    # One token for the group, the same 0600 file on every node (read here through docker exec: no argv holds it).
    tokens = {node: sim_cluster.node_exec(node, "cat", TOKEN_FILE).stdout for node in NODES}
    token = tokens["head"]
    assert re.fullmatch(r"[0-9a-f]{64}", token) and set(tokens.values()) == {token}, tokens
    for node in NODES:
        assert sim_cluster.node_exec(node, "stat", "-c", "%a", TOKEN_FILE).stdout.strip() == "600", node
    head_log = sim_cluster.engine_log("head")
    assert "Ray runtime started." in head_log and "Token authentication is disabled" not in head_log

    head_mgmt = sim_cluster.nodes()[0]["host"]
    head_fabric = sim_cluster.fabric_address("head")
    # The operator's side: cannot join the cluster, cannot connect a driver to submit work.
    join = ray_probe(sim_cluster, probe_image, "mgmt", f"ray start --address={head_mgmt}:6379 --num-gpus=1")
    assert refused(join), join
    driver = f'import ray; ray.init(address="{head_mgmt}:6379"); print(ray.get(ray.remote(lambda: 42).remote()))'
    submit = ray_probe(sim_cluster, probe_image, "mgmt", f"python3 -c '{driver}'")
    assert refused(submit) and "42" not in submit.stdout, submit

    # Every Ray server on every address of the head, called from this machine (on the management network) without
    # the token: each refuses (the GCS, both raylet servers, each worker process), none answers.
    listeners = ray_wildcard_listeners(sim_cluster, "head")
    assert listeners.get(6379) == "gcs_server" and "raylet" in listeners.values(), listeners
    assert any(name.startswith("ray::") for name in listeners.values()), listeners
    empty_message = tmp_path / "grpc-empty-message"
    empty_message.write_bytes(b"\0" * 5)  # gRPC framing: not compressed, length 0
    for port, process in listeners.items():
        statuses = {m: grpc_status(head_mgmt, port, m, empty_message) for m in RAY_METHODS}
        assert "16" in statuses.values() and "0" not in statuses.values(), (port, process, statuses)

    # The fabric side reaches Ray's ports: without the token it is refused, with it it is answered.
    status = f"ray status --address={head_fabric}:6379"
    assert refused(ray_probe(sim_cluster, probe_image, "fabric", f"ray start --address={head_fabric}:6379"))
    assert refused(ray_probe(sim_cluster, probe_image, "fabric", status))
    token_file = tmp_path / "ray-token"
    token_file.touch(mode=0o600)
    token_file.write_text(token)
    holder = ray_probe(sim_cluster, probe_image, "fabric", status, token_file)
    assert holder.returncode == 0, holder
    # No intruder joined: the cluster is still the head and its worker.
    assert len(re.findall(r"^ 1 node_[0-9a-f]+$", holder.stdout, re.M)) == 2, holder.stdout
    assert complete(outputs)["usage"]["completion_tokens"] == 4

    # Made once: a second `up` has nothing to change (no new token, no restart) and the nodes keep the token.
    pulumi("preview", "--expect-no-changes")
    assert sim_cluster.node_exec("head", "cat", TOKEN_FILE).stdout == token

    # Nowhere in the open.
    assert len(sampler.seen) > 50 and not [line[:200] for line in sampler.seen if token in line]
    assert token not in up.stdout + up.stderr
    for node in NODES:
        assert token not in sim_cluster.node_exec(node, "ps", "-eo", "args").stdout, node
        engine = sim_cluster.node_exec(node, "docker", "inspect", "spark-llm-engine").stdout
        assert token not in engine and "RAY_AUTH_TOKEN_PATH=/spark-llm/ray-token" in engine, node
        readable = files_others_read(sim_cluster, node)
        assert readable and not [path for path, content in readable.items() if token.encode() in content], node
    export = pulumi("stack", "export").stdout
    assert token not in export and "spark-scripts-ray-token" in export
    for path in (p for p in pulumi.config_file.parent.rglob("*") if p.is_file()):
        assert token.encode() not in path.read_bytes(), path


def beyond_the_fabric(sim: SimCluster, node: str, fabric: str) -> dict[int, str]:
    """TCP ports the node listens on at an address other than loopback and its fabric address, by process."""
    found = {}
    for line in sim.node_exec(node, "ss", "-Hltnp").stdout.splitlines():
        fields = line.split()
        address, _, port = fields[3].rpartition(":")
        process = re.search(r'\(\("([^"]+)"', fields[-1])
        if address.strip("[]") not in ("127.0.0.1", "::1", fabric) and not address.startswith("127."):
            found[int(port)] = process[1] if process else "?"
    return found


def test_with_the_firewall_the_group_ports_refuse_the_operator_side_while_the_group_serves(
    pulumi, sim_cluster, probe_image, tmp_path
):
    use_profile(pulumi, "vllm-ray")
    pulumi.up()  # the deployment of the test above (nothing to do), or its own when run alone
    head_mgmt = sim_cluster.nodes()[0]["host"]
    head_fabric = sim_cluster.fabric_address("head")
    preview = pulumi("preview").stdout
    assert "spark-llm:network.firewall is off: on head the group's ports listen beyond" in preview, preview
    assert "0.0.0.0:6379 (Ray's GCS)" in preview and "firewall is off: on worker-1" not in preview

    started = {node: sim_cluster.started_at(node) for node in NODES}
    pulumi.set("network.firewall", "fabric-only")
    pulumi.set("nodes[1].smClockCapMhz", "1800")
    try:
        [capping] = [line for line in pulumi("preview").stdout.splitlines() if "gpu-clock-worker-1" in line]
        assert "create" in capping, capping
        up = pulumi.up()
        assert "spark-firewall-head" in up.stdout and "nftables table inet spark-llm on head" in up.stdout
        assert "capped at 1800 MHz" in up.stdout and (
            sm_clock(sim_cluster, "worker-1"),
            sm_clock(sim_cluster, "head"),
        ) == ("1800", "2405")
        # No engine restarted for it; the table is spark-llm's own, beside Docker's.
        assert {node: sim_cluster.started_at(node) for node in NODES} == started
        for node in NODES:
            tables = sim_cluster.node_exec(node, "nft", "list", "tables").stdout
            assert "table inet spark-llm" in tables and "table ip filter" in tables, (node, tables)

        listeners = beyond_the_fabric(sim_cluster, "head", head_fabric)
        assert {6379, 22, 30000} <= set(listeners) and "raylet" in listeners.values(), listeners
        assert any(name.startswith("ray::") for name in listeners.values()), listeners
        answers = {port: tcp_connect(head_mgmt, port) for port in listeners}
        group = {port: answer for port, answer in answers.items() if port not in (22, 30000)}
        assert set(group.values()) == {"refused"}, {p: (listeners[p], a) for p, a in group.items()}
        # The API and ssh are not the group's: still open from here, and the group still serves.
        assert answers[30000] == "open" and answers[22] == "open"
        assert complete(pulumi.outputs())["usage"]["completion_tokens"] == 4
        # The fabric is where Ray is meant to be reached: a token holder is still answered there.
        token_file = tmp_path / "ray-token"
        token_file.touch(mode=0o600)
        token_file.write_text(sim_cluster.node_exec("head", "cat", TOKEN_FILE).stdout)
        status = f"ray status --address={head_fabric}:6379"
        assert ray_probe(sim_cluster, probe_image, "fabric", status, token_file).returncode == 0
        # ...and from the management network Ray's GCS refuses a token holder too: the door, not the token.
        shut = ray_probe(
            sim_cluster,
            probe_image,
            "mgmt",
            f"ray status --address={head_mgmt}:6379",
            token_file,
            env=SHUT_DOOR_TIMEOUTS,
        )
        assert shut.returncode and "Failed to connect to GCS" in shut.stdout + shut.stderr, shut

        # The cap lifted by hand on worker-1: drift to preview and to status, in the same words; `up` applies it again.
        said = SparkLlm(pulumi)("status")
        assert said.returncode == 0 and "drift" not in said.stdout, said.stdout
        sim_cluster.node_exec("worker-1", "nvidia-smi", "-rgc")
        preview = pulumi("preview").stdout
        assert "network.firewall is off" not in preview
        lifted = "the GPU's SM clock cap on worker-1 changed since `pulumi up` (gpu-clock-cap on worker-1: now lifted"
        assert lifted in preview, preview
        said = SparkLlm(pulumi)("status")
        assert said.returncode != 0 and lifted in " ".join(said.stdout.split()), said.stdout
        pulumi.up()
        assert sm_clock(sim_cluster, "worker-1") == "1800"
    finally:
        pulumi("destroy", "--yes", "--skip-preview", "--non-interactive")
        pulumi.reset_config()
    for node in NODES:
        assert "spark-llm" not in sim_cluster.node_exec(node, "nft", "list", "tables").stdout, node
    # The cap gone with the stack: the driver's own clocks, no record left.
    assert sm_clock(sim_cluster, "worker-1") == "2405"
    assert (
        sim_cluster.node_exec("worker-1", "ls", "/run/spark-llm", "/root/spark-llm", check=False).stdout.count(
            "gpu-clock-cap"
        )
        == 0
    )


def sm_clock(sim: SimCluster, node: str) -> str:
    """The node's SM clock as its nvidia-smi reads it now (the sim's: its top, or the lock's)."""
    return sim.node_exec(node, "nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits").stdout.strip()
