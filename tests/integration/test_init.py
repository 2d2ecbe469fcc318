"""`spark-llm init` on the sim (1 head + 1 worker), with the real CLI, ssh and Pulumi: from the head's address to a
stack that `pulumi up` serves with no edit; never over an existing file; a changed host key refused; each bad input
one clear line with nothing written and no stack made (issue 33, item 1).

The sim shows what discovery reads on a Spark: `sim roce on` makes each node's RoCE twins ACTIVE over its fabric
interface (/sys/class/infiniband), its nvidia-smi names a GB10 and its /proc/meminfo says a GB10's memory.
The tests run in file order: the first one's stack is what the next two find on disk.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from tests.integration.conftest import (
    REPO,
    SIM,
    STACK_FILE,
    WORKER,
    Pulumi,
    SimCluster,
    backend_env,
    complete,
    run,
)

pytestmark = pytest.mark.integration

STACK = f"init-{WORKER or 'main'}"
TARGET = REPO / f"Pulumi.{STACK}.yaml"
HOST_KEY = "/etc/ssh/ssh_host_ed25519_key"


@dataclass
class Sim:
    cluster: SimCluster
    env: dict[str, str]
    head: str  # the head's management address, as the operator reaches it
    key: str

    def fingerprint(self, node: str) -> str:
        """What the person reads on the node's console (`ssh-keygen -lf`) before accepting its key."""
        out = self.cluster.node_exec(node, "ssh-keygen", "-lf", f"{HOST_KEY}.pub").stdout
        return out.split()[1]

    def accepts(self) -> list[str]:
        return [word for node in ("head", "worker-1") for word in ("--accept", self.fingerprint(node))]

    def init(self, *args: str, stack: str = STACK, head: str | None = None):
        cmd = [sys.executable, "-m", "spark_llm.ops.cli", "init", "--stack", stack, "--key", self.key]
        cmd += ["--head", head or f"root@{self.head}", "--config-from", "sim/stack-defaults.yaml"]
        cmd += ["--config-from", "sim/roce.yaml"]
        cmd += [*args]
        return run(cmd, env=self.env, check=False, timeout=300)

    def stacks(self) -> list[str]:
        return run(["pulumi", "stack", "ls", "--non-interactive"], env=self.env).stdout


def sim(*args: str) -> str:
    return run([str(SIM), *args], timeout=120).stdout


@pytest.fixture(scope="module")
def sim_nodes(sim_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    backend = tmp_path_factory.mktemp("pulumi-state")
    config = yaml.safe_load(STACK_FILE.read_text())["config"]
    head = next(n for n in config["spark-llm:nodes"] if n["role"] == "head")
    sim("roce", "on")
    nodes = Sim(sim_cluster, backend_env(backend), head["host"], config["spark-llm:sshKeyPath"])
    yield nodes
    if TARGET.exists():
        Pulumi(env=nodes.env, config_file=TARGET, stack=STACK)("destroy", "--yes", "--skip-preview", check=False)
        run(["pulumi", "stack", "rm", STACK, "--yes", "--force", "--non-interactive"], env=nodes.env, check=False)
    for leftover in REPO.glob(f"Pulumi.{STACK}*.yaml*"):
        leftover.unlink()
    sim("roce", "off")


def normalized(text: str) -> str:
    """A stack file with what differs between clusters and runs made neutral: time, addresses, keys, paths."""
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", "DATE", text)
    text = re.sub(r"\b\d{1,3}(?:\.\d{1,3}){3}(?:/\d+)?\b", "ADDRESS", text)
    text = re.sub(r"SHA256:[A-Za-z0-9+/]+", "SHA256:FINGERPRINT", text)
    text = re.sub(r"ssh-ed25519 [A-Za-z0-9+/=]+", "ssh-ed25519 KEY", text)
    text = re.sub(r"encryptionsalt: \S+", "encryptionsalt: SALT", text)
    text = re.sub(r'sshKeyPath: "[^"]+"', 'sshKeyPath: "KEY_PATH"', text)
    return re.sub(r"\d+ GB free", "N GB free", text)


def readme_example() -> str:
    readme = (REPO / "README.md").read_text()
    block = readme.split("<!-- init-example:begin -->")[1].split("<!-- init-example:end -->")[0]
    return block.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_init_writes_a_stack_that_pulumi_up_serves_with_no_edit(sim_nodes: Sim):
    result = sim_nodes.init(*sim_nodes.accepts())
    assert result.returncode == 0, result.stderr[-3000:]
    said = result.stderr
    assert "workers among the head's fabric neighbours:" in said
    assert re.search(r"^head: head x86_64, NVIDIA GB10 \(simulated\), 121\.7 GiB, .* fabric eth0 \S+ mtu 1500 RoCE "
                     r"rocep1s0f0 roceP2p1s0f0; management eth1;", said, re.M), said  # fmt: skip
    assert f"wrote {TARGET}" in said and f"created the stack {STACK}" in said
    assert f"pulumi config set --secret spark-llm:apiKey --stack {STACK}" in said
    text = TARGET.read_text()
    # What a reviewer reads: where each value came from, and no secret.
    assert "# ED25519 SHA256:" in text and "accepted with --accept (ssh-keyscan from the head)" in text
    assert 'roceDevices: ["rocep1s0f0", "roceP2p1s0f0"]' in text
    assert "PRIVATE KEY" not in text and "apiKey" not in text
    # The README shows this file as a user sees it.
    assert normalized(readme_example()) == normalized(text)

    pulumi = Pulumi(env=sim_nodes.env, config_file=TARGET, stack=STACK)
    pulumi.up()
    outputs = pulumi.outputs()
    assert complete(outputs)["usage"]["completion_tokens"] == 4
    # The discovered twins reach the engines: NCCL's own line says RoCE on both ranks.
    assert outputs["fabric_transport"] == {n: "NET/IB rocep1s0f0,roceP2p1s0f0" for n in ("head", "worker-1")}


def test_an_existing_stack_file_is_never_overwritten(sim_nodes: Sim):
    before = TARGET.read_bytes()
    result = sim_nodes.init(*sim_nodes.accepts())
    assert result.returncode == 2
    assert f"spark-llm init: {TARGET} exists: init never overwrites it." in result.stderr
    assert "nothing written" in result.stderr and TARGET.read_bytes() == before


def test_a_host_key_changed_since_the_last_init_is_refused(sim_nodes: Sim):
    before = TARGET.read_bytes()
    old = sim_nodes.accepts()
    cluster = sim_nodes.cluster
    cluster.node_exec("worker-1", "sh", "-c", f"cp {HOST_KEY} /root/kept-key && cp {HOST_KEY}.pub /root/kept-key.pub")
    try:
        cluster.node_exec("worker-1", "sh", "-c", f"rm {HOST_KEY}* && ssh-keygen -q -t ed25519 -N '' -f {HOST_KEY}"
                          " && pkill -HUP -x sshd")  # fmt: skip
        new = sim_nodes.fingerprint("worker-1")
        # The person re-runs init as before, with the fingerprints they accepted then: the worker's is not it now.
        result = sim_nodes.init(*old, "--force")
        assert result.returncode == 2, result.stderr
        assert f"presents ED25519 {new}, not the key the existing stack file pins (ED25519 {old[3]})" in result.stderr
        assert f"run init with --accept {new} --force" in result.stderr
        assert TARGET.read_bytes() == before and not list(REPO.glob(f"Pulumi.{STACK}.yaml.bak-*"))
    finally:
        restore = f"cp /root/kept-key {HOST_KEY} && cp /root/kept-key.pub {HOST_KEY}.pub && pkill -HUP -x sshd"
        cluster.node_exec("worker-1", "sh", "-c", restore)


def _fabric(sim_nodes: Sim, node: str) -> str:
    config = yaml.safe_load(STACK_FILE.read_text())["config"]
    return next(n["fabricAddress"] for n in config["spark-llm:nodes"] if n["name"] == node)


def _unused(address: str) -> str:
    return address.rsplit(".", 1)[0] + ".250"


BAD = "init-bad-" + (WORKER or "main")


@pytest.mark.parametrize(
    "case",
    ["unreachable head", "wrong user", "worker not through the head", "no active RoCE port", "one subnet", "MTUs"],
)
def test_each_bad_input_is_one_clear_line_and_nothing_is_written(sim_nodes: Sim, case: str):
    cluster = sim_nodes.cluster
    worker_fabric = _fabric(sim_nodes, "worker-1")
    args: list[str] = sim_nodes.accepts()
    head = None
    undo: list[str] = []
    if case == "unreachable head":
        head = f"root@{_unused(sim_nodes.head)}"
        expected = f"the head {_unused(sim_nodes.head)}:22 did not answer ssh-keyscan within 5 s: check the address"
    elif case == "wrong user":
        head = f"nobody@{sim_nodes.head}"
        expected = f"ssh as nobody@{sim_nodes.head}:22 was refused (Permission denied"
    elif case == "worker not through the head":
        args += ["--worker", _unused(worker_fabric)]
        expected = f"worker-1 {_unused(worker_fabric)}:22 did not answer ssh-keyscan from the head: give the address"
    elif case == "no active RoCE port":
        sim("roce", "off", "head")
        undo = ["roce"]
        expected = f"head ({sim_nodes.head}) shows no RoCE device (/sys/class/infiniband is empty)"
    elif case == "one subnet":
        # A second address in the fabric's subnet, on an interface of its own (no route: the fabric keeps working).
        extra = (
            "ip link add spark-extra type veth peer name spark-extra-p && ip link set spark-extra up"
            f" && ip addr add {_unused(worker_fabric)}/24 dev spark-extra noprefixroute"
        )
        cluster.node_exec("worker-1", "sh", "-c", extra)
        undo = ["dummy"]
        expected = f"eth0 ({worker_fabric}/24) and spark-extra ({_unused(worker_fabric)}/24) are in one subnet"
    else:
        cluster.node_exec("worker-1", "ip", "link", "set", "eth0", "mtu", "1400")
        undo = ["mtu"]
        expected = "the fabric MTUs differ (head eth0 1500, worker-1 eth0 1400): set the same MTU on both ends"
    try:
        result = sim_nodes.init(*args, stack=BAD, head=head)
    finally:
        if "roce" in undo:
            sim("roce", "on", "head")
        if "dummy" in undo:
            cluster.node_exec("worker-1", "ip", "link", "del", "spark-extra")
        if "mtu" in undo:
            cluster.node_exec("worker-1", "ip", "link", "set", "eth0", "mtu", "1500")
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert any(expected in line for line in lines), result.stderr
    assert lines[-1] == "spark-llm init: nothing written" and "Traceback" not in result.stderr
    assert not list(REPO.glob(f"Pulumi.{BAD}.yaml*")) and BAD not in sim_nodes.stacks()


def test_dry_run_prints_the_file_and_makes_nothing(sim_nodes: Sim):
    result = sim_nodes.init(*sim_nodes.accepts(), "--dry-run", stack=BAD)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("# Written by `spark-llm init`") and "spark-llm:nodes:" in result.stdout
    assert "wrote" not in result.stderr and "created the stack" not in result.stderr
    assert not list(REPO.glob(f"Pulumi.{BAD}.yaml*")) and BAD not in sim_nodes.stacks()


def test_json_says_what_was_found_for_scripts(sim_nodes: Sim):
    result = sim_nodes.init(*sim_nodes.accepts(), "--dry-run", "--json", stack=BAD)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert (report["stack"], report["written"]) == (BAD, False) and report["text"].startswith("# Written by")
    head, worker = report["nodes"]
    assert (head["role"], worker["role"]) == ("head", "worker") and worker["hostname"] == "worker-1"
    assert worker["fabric"]["roce_devices"] == ["rocep1s0f0", "roceP2p1s0f0"] and worker["fabric"]["mtu"] == 1500
    assert head["host_key"] == f"ED25519 {sim_nodes.fingerprint('head')}"
    assert not list(REPO.glob(f"Pulumi.{BAD}.yaml*")) and BAD not in sim_nodes.stacks()
