"""The fabric proof and the host as it last worked, on the sim (1 head + 1 worker), with the real pulumi CLI: one
deployment with spark-llm:network.roceDevices, the nodes' /dev/infiniband and /sys/class/infiniband made by
`sim/sim roce on`.

User stories (issue 32, items 2 and 4; issue 41, item 2): with RoCE, every rank's NCCL transport is a stack output; a
kernel changed on a node since the start that served is named by `pulumi preview` (node, field, old -> new); a rank
whose NCCL falls back to sockets fails the start naming the node and the likely cause, and with `fabricProof: warn`
the group serves and `spark-llm status` shows `NET/Socket` for that rank, and with spark-llm:monitoring the
sockets alert fires naming it (issue 42); a roceDevices entry no node has and fabric
MTUs set apart are refused by `pulumi preview`, `preflight` and `up`, naming node and key, with nothing stopped; a
node without RDMA devices is refused before anything stops.

The tests run in file order: each goes on from the state the one before left.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest

from spark_llm.ops.prometheus import Prometheus
from tests.integration.conftest import SIM, Pulumi, SimCluster, complete, run
from tests.integration.test_supervisor import supervisor_waiting
from tests.waits import wait_for

pytestmark = pytest.mark.integration

DEVICES = ("rocep1s0f0", "roceP2p1s0f0")
MONITORING_PASSWORD = "pw-fabric-module"
# The stand-in's socket-fallback knob: a file in the node's cache dir, the containers' ~/.cache.
FALLBACK_KNOB = "/root/spark-llm/cache/standin-nccl-socket"
# The sim's nodes cannot raise memlock (no CAP_SYS_RESOURCE): their hard limit, 8 MiB.
SIM_MEMLOCK = "8388608"
KERNEL = "/proc/sys/kernel/osrelease"
NEW_KERNEL = "7.0.0-1019-nvidia"
ORIGINAL_KERNEL: list[str] = []
"""worker-1's own kernel version (the fixture reads it before the tests change it)."""


def sim(*args: str) -> str:
    return run([str(SIM), *args], timeout=120).stdout


def preflight(pulumi: Pulumi) -> dict:
    """`spark-llm preflight --json` on the test's stack: its report."""
    argv = [sys.executable, "-m", "spark_llm.ops.cli", "preflight", "--stack", "sim", "--config-file"]
    result = run([*argv, str(pulumi.config_file), "--json"], env=pulumi.env, check=False, timeout=300)
    return json.loads(result.stdout)


def spark_llm(pulumi: Pulumi, *args: str) -> str:
    """`spark-llm ARGS --stack sim --config-file <the test's copy>`: its output (stdout then stderr)."""
    command, *rest = args
    argv = [sys.executable, "-m", "spark_llm.ops.cli", command, "--stack", "sim", "--config-file"]
    result = run([*argv, str(pulumi.config_file), *rest], env=pulumi.env, check=False, timeout=600)
    return result.stdout + result.stderr


def shown(text: str, first: str) -> None:
    """Print what the user saw from its line starting with `first` (for docs/real-sparks.md, with `-s`)."""
    print(f"---- shown ----\n{text[text.index(first) :][:3000]}\n---- end ----")


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi, sim_cluster: SimCluster) -> Iterator[Pulumi]:
    # With spark-llm:monitoring (its image on every node, from `sim up`), scraping every 2 s: a rank on sockets is
    # an alert too (issue 42).
    run([str(SIM), "up", "--load-monitoring"], timeout=1200)
    pulumi.reset_config()
    pulumi("config", "set", "--secret", "monitoringPassword", MONITORING_PASSWORD)
    pulumi.set("monitoring.scrapeSeconds", "2")
    sim("roce", "on")
    pulumi.set("network.roceDevices[0]", DEVICES[0])
    pulumi.set("network.roceDevices[1]", DEVICES[1])
    pulumi.set("network.memlockBytes", SIM_MEMLOCK)
    pulumi.up()
    ORIGINAL_KERNEL.append(sim_cluster.node_exec("worker-1", "cat", KERNEL).stdout.strip())
    yield pulumi
    sim_cluster.node_exec("worker-1", "rm", "-f", FALLBACK_KNOB, check=False)
    sim("host-field", "worker-1", "kernel", "off")
    # The next module's nodes as `sim up` made them (removing a device does not touch a running container), and
    # its stack file without the monitoring.
    sim("roce", "off")
    run([str(SIM), "up"], timeout=1200)


def test_with_roce_every_ranks_transport_is_net_ib_in_a_stack_output(deployed: Pulumi, sim_cluster: SimCluster):
    outputs = deployed.outputs()
    assert outputs["fabric_transport"] == {node: f"NET/IB {','.join(DEVICES)}" for node in ("head", "worker-1")}
    assert outputs["start_timeline"]["fabric"]["worker-1"]["line"].startswith(
        f"NET/IB : Using [0]{DEVICES[0]}:1/RoCE [1]{DEVICES[1]}:1/RoCE [RO]; OOB eth0:"
    )
    # The engine got what NCCL needs to print it, and what RDMA needs.
    inspect = json.loads(sim_cluster.node_exec("worker-1", "docker", "inspect", "spark-llm-engine").stdout)[0]
    assert {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET", f"NCCL_IB_HCA={','.join(DEVICES)}"} <= set(
        inspect["Config"]["Env"]
    )
    assert inspect["HostConfig"]["Devices"][0]["PathOnHost"] == "/dev/infiniband"
    assert "CAP_IPC_LOCK" in inspect["HostConfig"]["CapAdd"]
    # The host as it was at this start, recorded per node (absent fields say so).
    hosts = outputs["start_timeline"]["hosts"]
    assert hosts["worker-1"]["kernel"] == ORIGINAL_KERNEL[0]
    assert hosts["worker-1"]["nccl"] == "2.27.7"
    assert hosts["worker-1"]["mtu.eth0"] == "1500"
    assert set(hosts["worker-1"]["roce_devices"].split()) == set(DEVICES)
    assert hosts["worker-1"][f"port_state.{DEVICES[1]}"] == "ACTIVE"
    worker_address = sim_cluster.fabric_address("worker-1")
    mapped = "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}".format(*map(int, worker_address.split(".")))
    assert mapped in hosts["worker-1"][f"gids.{DEVICES[0]}"].split()
    assert hosts["head"]["nvidia_driver"] == "absent"
    assert hosts["head"]["image"].startswith("sha256:")


def test_a_kernel_changed_since_the_start_that_served_is_named_by_preview(deployed: Pulumi, sim_cluster: SimCluster):
    old = ORIGINAL_KERNEL[0]
    sim("host-field", "worker-1", "kernel", NEW_KERNEL)
    preview = deployed("preview", "--diff")
    text = preview.stdout + preview.stderr
    assert "the hosts changed since the last start that served" in text, text[-3000:]
    assert f"worker-1: kernel {old} -> {NEW_KERNEL}" in text
    assert "head: kernel" not in text
    shown(text, "the hosts changed")


HISTORY = "/root/spark-llm/history/starts.jsonl"


def history(sim_cluster: SimCluster) -> list[dict]:
    """The head's history of starts, oldest first (a line being written is skipped)."""
    out = []
    for line in sim_cluster.node_exec("head", "cat", HISTORY, check=False).stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def last_start(sim_cluster: SimCluster) -> dict:
    starts = history(sim_cluster)
    return starts[-1] if starts else {}


def test_a_supervisor_restart_onto_sockets_serves_and_status_and_preview_name_the_rank(
    deployed: Pulumi, sim_cluster: SimCluster
):
    """Issue 41, 1: the supervisor restarted the group after a worker went down, NCCL came back on sockets, and
    status said `in sync`, exit 0, while the worker's log said `NET/Socket`. Now the supervisor's restart is a start
    of the history with its fabric proof, as `up`'s: the group serves (slow beats down), and status (exit 1) and
    preview name worker-1 and `NET/Socket`. (The worker's engine dies here where a reboot would stop it: the sim's
    RDMA devices do not outlive its node container's restart, and the supervisor's path is the same: a member
    exited, the group restarted in order.)"""
    deployed.set("supervisor.enabled", "true")
    deployed.set("supervisor.pollSeconds", "1")
    deployed.up()
    try:
        # Issue 41, 2: first the supervisor's own check before a restart, the rule preview refuses a start on. With
        # one of worker-1's ports DOWN it waits, saying which and what to do, and restarts nothing; status says it.
        port_state = f"/sys/class/infiniband/{DEVICES[1]}/ports/1/state"
        sim_cluster.node_exec("worker-1", "sh", "-c", f"echo '1: DOWN' > {port_state}")
        sim_cluster.node_exec("worker-1", "touch", FALLBACK_KNOB)
        sim_cluster.node_exec("worker-1", "docker", "kill", "spark-llm-engine")
        down = (
            f"the fabric is not ready for a start: worker-1's RoCE device {DEVICES[1]} (spark-llm:network.roceDevices)"
            " is DOWN, not ACTIVE: NCCL would not open it: connect the cable of its port and bring the port up"
        )
        wait_for("the supervisor to hold the restart", lambda: down in supervisor_waiting(sim_cluster), 60, 0.5)
        running = ("docker", "inspect", "-f", "{{.State.Running}}", "spark-llm-engine")
        assert sim_cluster.node_exec("worker-1", *running).stdout.strip() == "false"  # nothing restarted
        status = run(
            [sys.executable, "-m", "spark_llm.ops.cli", "status", "--stack", "sim", "--config-file",
             str(deployed.config_file), "--json"], env=deployed.env, check=False)  # fmt: skip
        report = json.loads(status.stdout)
        assert down in report["supervisor"]["waiting"], report["supervisor"]
        assert "`spark-llm exec --stack sim worker-1 -- ibdev2netdev`" in report["supervisor"]["waiting"]
        # Status and preview say what `up` would do: refuse the start, nothing stopped (not "restarts the group").
        refused = f"{DEVICES[1]} (spark-llm:network.roceDevices) is DOWN, not ACTIVE: NCCL would not open it"
        assert f"{refused}: `pulumi up` would refuse the start before anything stops" in report["summary"], report
        preview = deployed("preview", check=False)
        assert preview.returncode != 0 and f"error: worker-1's RoCE device {refused}" in preview.stdout, preview.stdout
        sim_cluster.node_exec("worker-1", "sh", "-c", f"echo '4: ACTIVE' > {port_state}")  # back: it restarts
        wait_for(
            "the supervisor's restart to be recorded with its fabric proof",
            lambda: last_start(sim_cluster).get("by") == "supervisor" and "fabric" in last_start(sim_cluster),
            120,
            0.5,
        )
        record = last_start(sim_cluster)
        assert record["fabric"]["worker-1"]["transport"] == "Socket" and not record["fabric"]["head"]["problem"]
        # The canary, asked as the gate asks it, recorded with the restart: the same answer as `up`'s start.
        gate = next(h for h in reversed(history(sim_cluster)) if h.get("by") != "supervisor" and "canary" in h)
        assert record["canary"]["answer"] == gate["canary"]["answer"] and not record["canary"]["error"], record
        result = run(
            [sys.executable, "-m", "spark_llm.ops.cli", "status", "--stack", "sim", "--config-file",
             str(deployed.config_file), "--json"], env=deployed.env, check=False)  # fmt: skip
        report = json.loads(result.stdout)
        assert result.returncode == 1 and report["state"] == "off the fabric", report
        assert report["summary"].startswith("worker-1: NCCL fell back to sockets (NET/IB : No device found., then")
        assert "NET/Socket : Using [0]eth0:" in report["summary"] and "by the supervisor's restart" in report["summary"]
        preview = deployed("preview")
        said = preview.stdout + preview.stderr
        assert "engine group: worker-1: NCCL fell back to sockets (NET/IB : No device found., then NET/Socket" in said
        assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4  # it serves
        # Issue 42: the head's agent reports the rank's transport, and the alert on it fires naming worker-1.
        served = Prometheus(deployed.outputs()["monitoring"], MONITORING_PASSWORD, timeout=20)
        wait_for(
            "the sockets alert to fire for worker-1",
            lambda: (
                [
                    (a.state, a.labels.get("node"), a.labels.get("rank"))
                    for a in served.alerts()
                    if a.name == "SparkLlmNcclOnSockets"
                ]
                == [("firing", "worker-1", "1")]
            ),  # fmt: skip
            60,
        )
        [alert] = [a for a in served.alerts() if a.name == "SparkLlmNcclOnSockets"]
        assert "rank 1 on worker-1 chose NCCL's socket transport" in alert.description
    finally:
        deployed.set("supervisor.enabled", "false")
        deployed.up()


def test_a_socket_fallback_fails_the_start_naming_the_node_and_the_cause(deployed: Pulumi, sim_cluster: SimCluster):
    sim_cluster.node_exec("worker-1", "touch", FALLBACK_KNOB)
    # The worker's engine stopped (a crash, a reboot): `pulumi up` restarts the group in order, and its NCCL now
    # finds no RDMA device.
    sim_cluster.node_exec("worker-1", "docker", "stop", "-t", "1", "spark-llm-engine")
    result = deployed.up(check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out[-3000:]
    assert (
        "worker-1 (worker): NCCL fell back to sockets (NET/IB : No device found., then NET/Socket : Using [0]eth0:"
        in out
    ), out[-4000:]
    assert f"instead of RoCE over {','.join(DEVICES)}" in out
    # The causes the node shows: its sysfs lists the configured devices, but the container's memlock is limited.
    assert "likely cause: NCCL_IB_HCA names" not in out
    assert f"likely cause: the container's memlock limit is {SIM_MEMLOCK} bytes" in out
    assert (
        "likely cause: else: the RoCE GID index (NCCL_IB_GID_INDEX unset: NCCL picks one) or NCCL_SOCKET_IFNAME=eth0"
        in out
    )
    assert "head (head): NCCL fell back" not in out
    shown(out, "worker-1 (worker): NCCL fell back")
    assert "spark-llm:network.fabricProof warn" in out
    # A failed start's error repeats what changed on the hosts since the last start that served.
    assert f"worker-1: kernel {ORIGINAL_KERNEL[0]} -> {NEW_KERNEL}" in out


def test_with_the_warn_setting_it_serves_and_status_shows_net_socket_for_that_rank(deployed: Pulumi):
    deployed.set("network.fabricProof", "warn")
    result = deployed.up(check=False)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "warning (spark-llm:network.fabricProof warn): worker-1 (worker): NCCL fell back to sockets" in out
    outputs = deployed.outputs()
    assert complete(outputs)["usage"]["completion_tokens"] == 4
    assert outputs["fabric_transport"] == {"head": f"NET/IB {','.join(DEVICES)}", "worker-1": "NET/Socket eth0"}
    status = spark_llm(deployed, "status")
    assert "    fabric: NET/Socket eth0 (NCCL fell back to sockets" in status, status[-3000:]
    assert f"    fabric: NET/IB {','.join(DEVICES)}" in status
    shown(status, "last start:")


def test_a_device_no_node_has_and_mtus_set_apart_are_refused_by_preview_preflight_and_up_with_nothing_stopped(
    deployed: Pulumi, sim_cluster: SimCluster
):
    """Issue 41, item 2: NCCL takes a roceDevices entry that names no device without an error (it opens the others,
    or falls back to sockets), and nodes at MTU 9000 and 1500 passed when network.mtu was 1500."""
    before = {n: sim_cluster.started_at(n) for n in ("head", "worker-1")}
    deployed.set("network.roceDevices[1]", "rocep9s0f9")  # network.mtu is the sim's 1500
    sim_cluster.node_exec("worker-1", "ip", "link", "set", "eth0", "mtu", "9000")
    try:
        preview = deployed("preview", check=False)
        out = preview.stdout + preview.stderr
        assert preview.returncode != 0, out[-3000:]
        for node in ("head", "worker-1"):
            assert (
                f"spark-llm:network.roceDevices names rocep9s0f9, which {node} does not have (its"
                f" /sys/class/infiniband lists {', '.join(sorted(DEVICES))}): name {node}'s ACTIVE RoCE devices there"
            ) in out, out[-3000:]
        assert (
            "worker-1's eth0 has MTU 9000, spark-llm:network.mtu is 1500 (head's eth0 1500): set MTU 1500 there" in out
        )
        assert "Nothing was run on any node (no engine was stopped)." in out
        shown(out, "spark-llm:network.roceDevices names")

        report = preflight(deployed)
        failed = {(c["node"], c["check"]): c for c in report["checks"] if c["status"] == "fail"}
        assert set(failed) == {("head", "rdma"), ("worker-1", "rdma"), ("worker-1", "interfaces")}, failed
        assert failed["worker-1", "rdma"]["detail"].startswith(
            "spark-llm:network.roceDevices names rocep9s0f9, which worker-1 does not have"
        )
        assert failed["worker-1", "interfaces"]["detail"] == (
            "worker-1's eth0 has MTU 9000, spark-llm:network.mtu is 1500 (head's eth0 1500)"
        )

        result = deployed.up(check=False)
        out = result.stdout + result.stderr
        assert result.returncode != 0 and "Nothing was run on any node (no engine was stopped)." in out, out[-3000:]
        assert "names rocep9s0f9, which worker-1 does not have" in out
    finally:
        sim_cluster.node_exec("worker-1", "ip", "link", "set", "eth0", "mtu", "1500")
        deployed.set("network.roceDevices[1]", DEVICES[1])
    assert {n: sim_cluster.started_at(n) for n in ("head", "worker-1")} == before
    assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4


def test_a_node_without_rdma_devices_is_refused_before_anything_stops(deployed: Pulumi, sim_cluster: SimCluster):
    # Docker cannot create a container with `--device /dev/infiniband` on a node without it, and `up` would find
    # that out after the group was stopped.
    before = {n: sim_cluster.started_at(n) for n in ("head", "worker-1")}
    sim("roce", "off", "worker-1")
    preview = deployed("preview", check=False)
    said = preview.stdout + preview.stderr
    assert preview.returncode != 0, said[-3000:]
    assert "worker-1 has no /dev/infiniband, which spark-llm:network.roceDevices mounts" in said
    assert f"names {', '.join(DEVICES)}, and worker-1 has no RoCE device (/sys/class/infiniband lists none)" in said
    result = deployed.up(check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0 and "Nothing was run on any node (no engine was stopped)." in out, out[-3000:]
    assert {n: sim_cluster.started_at(n) for n in ("head", "worker-1")} == before
    assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
    shown(out, "worker-1 has no /dev/infiniband")
