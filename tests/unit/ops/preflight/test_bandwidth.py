"""`spark-llm preflight --bandwidth`: the tool for each pair (RDMA where both nodes have a device, TCP otherwise,
missing named), the figures read from iperf3's and perftest's output, and the verdict against the link's speed."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from spark_llm.ops.preflight import bandwidth
from spark_llm.ops.render import FAIL, PASS
from spark_llm.plan.scripts import bash_lib
from tests.unit.ops.node_facts import build

NODE_IPERF = (
    "tool iperf3 node /usr/bin/iperf3\ntool ib_write_bw missing: neither the node nor the engine image x has it"
)
IMAGE_IB = "tool iperf3 node /usr/bin/iperf3\ntool ib_write_bw image nvcr.io/nvidia/vllm:25.11-py3"
ROCE = "roce rocep1s0f0 ACTIVE\nroce roceP2p1s0f0 ACTIVE\n"


def facts(link: str = "link enp1s0f0np0 200000", roce: str = "", tools: str = NODE_IPERF) -> bandwidth.NodeFacts:
    return bandwidth.parse_facts(f"{link}\n{roce}{tools}\n")


@pytest.fixture
def plan(raw_config):
    raw_config["network"] = {"fabricInterfaces": ["enp1s0f0np0"], "roceDevices": ["roceP2p1s0f0"]}
    return build(raw_config)


def test_facts_read_the_interface_its_speed_the_rdma_devices_and_how_each_tool_starts():
    read = facts(roce=ROCE, tools=IMAGE_IB)
    assert (read.interface, read.speed_mbit) == ("enp1s0f0np0", 200000)
    assert read.roce == {"rocep1s0f0": "ACTIVE", "roceP2p1s0f0": "ACTIVE"}
    assert read.tools["iperf3"] == bandwidth.Tool("iperf3", "node", "/usr/bin/iperf3")
    assert read.tools["ib_write_bw"].how == "image"


@pytest.mark.parametrize("speed", ["-1", "unknown", ""])
def test_a_speed_the_kernel_does_not_know_is_unknown_not_zero(speed):
    assert facts(link=f"link eth0 {speed}").speed_mbit is None


def test_rdma_where_both_nodes_have_a_device_with_the_configured_twin_first(plan):
    choice = bandwidth.choose(plan, plan.workers[0], facts(roce=ROCE, tools=IMAGE_IB), facts(roce=ROCE, tools=IMAGE_IB))
    assert (choice.tool, choice.head_device, choice.worker_device) == ("ib_write_bw", "roceP2p1s0f0", "roceP2p1s0f0")
    assert choice.head is not None and choice.head.started == "a container from the engine image " + (
        "nvcr.io/nvidia/vllm:25.11-py3"
    )


def test_tcp_when_a_node_has_no_rdma_device(plan):
    choice = bandwidth.choose(plan, plan.workers[0], facts(roce=ROCE), facts())
    assert choice.tool == "iperf3" and choice.worker is not None
    assert choice.worker.started == "the node's own /usr/bin/iperf3"


def test_a_tool_neither_the_node_nor_the_image_has_is_named_with_what_to_install(plan):
    choice = bandwidth.choose(plan, plan.workers[0], facts(roce=ROCE), facts(roce=ROCE))
    assert choice.tool is None
    assert "ib_write_bw (both nodes have RDMA devices)" in choice.missing
    assert "spark-1: neither the node nor the engine image x has it" in choice.missing
    assert choice.fix == "install Debian's perftest on the nodes, or use an engine image that has ib_write_bw"


def test_the_facts_script_run_here_names_a_missing_tool_and_image(plan):
    """The real bash of scripts/lib/bandwidth.sh on this machine (no iperf3 here, no such image)."""
    script = bandwidth.facts_script(plan, plan.head).replace(plan.head.fabric_address, "127.0.0.1")
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=True).stdout
    read = bandwidth.parse_facts(out)
    assert read.interface == "lo"
    missing = read.tools["ib_write_bw"]
    assert missing.how is None and missing.where.startswith("not on the node, and the engine image")


def iperf3_report(mbit: float) -> str:
    figure = {"bits_per_second": mbit * 1e6}
    return json.dumps({"end": {"sum_sent": figure, "sum_received": figure}})


def test_iperf3_figures_are_the_receivers_each_way_and_an_error_is_kept():
    text = f"--- to\n{iperf3_report(382.5)}\n--- from\n" + json.dumps({"error": "unable to connect to server"})
    assert bandwidth.iperf3_mbit(text) == {"to": pytest.approx(382.5), "from": "unable to connect to server"}


PERFTEST = """\
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      1062345          0.00               92.83              0.177057
---------------------------------------------------------------------------------------
"""


def test_ib_write_bw_average_in_mbit_and_its_last_line_when_it_failed():
    assert bandwidth.ib_write_bw_mbit(PERFTEST) == pytest.approx(92830)
    assert bandwidth.ib_write_bw_mbit("Couldn't connect to 192.168.200.13:5201\n") == (
        "Couldn't connect to 192.168.200.13:5201"
    )


def tcp(plan):
    return bandwidth.choose(plan, plan.workers[0], facts(), facts())


def test_a_figure_near_the_link_passes_naming_the_tool_and_how_it_started(plan):
    check = bandwidth.verdict(plan, plan.workers[0], tcp(plan), {"to": 382.0, "from": 383.0}, 400)
    assert check.status == PASS
    assert "spark-1 -> spark-2 382 Mbit/s, spark-2 -> spark-1 383 Mbit/s of a 400 Mbit/s link" in check.detail
    assert "iperf3 (TCP, 4 streams): on spark-1 the node's own /usr/bin/iperf3" in check.detail


def test_below_half_the_link_fails_with_the_likely_causes(plan):
    check = bandwidth.verdict(plan, plan.workers[0], tcp(plan), {"to": 26000.0, "from": 150000.0}, 200000)
    assert check.status == FAIL and check.detail.startswith("below half the link's speed")
    assert "13%" in check.detail and "ethtool" in check.fix


def test_a_direction_without_a_figure_fails_saying_what_the_tool_said(plan):
    check = bandwidth.verdict(plan, plan.workers[0], tcp(plan), {"to": "unable to connect to server"}, 400)
    assert check.status == FAIL and "spark-1 -> spark-2: unable to connect to server" in check.detail


def test_the_worker_server_is_bounded_by_timeout(plan):
    script = bandwidth.serve_script(tcp(plan), plan, plan.workers[0], 5201, 3)
    assert script.rstrip().endswith(
        f"bw_serve 'iperf3' 'node' '{plan.image.ref}' '192.168.200.13' '5201' '3' '38' '' ''"
    )
    assert "timeout -k 2" in script


def test_rdma_uses_the_gid_index_nccl_is_told(raw_config):
    raw_config["network"] = {"fabricInterfaces": ["enp1s0f0np0"], "roceDevices": ["roceP2p1s0f0"]}
    raw_config["engine"] = {**raw_config.get("engine", {}), "env": {"NCCL_IB_GID_INDEX": "3"}}
    plan = build(raw_config)
    rdma = facts(roce=ROCE, tools=IMAGE_IB)
    choice = bandwidth.choose(plan, plan.workers[0], rdma, rdma)
    client = bandwidth.client_script(choice, plan, plan.workers[0], 18515, 3)
    assert client.rstrip().endswith("'192.168.200.13' '18515' '3' 'roceP2p1s0f0' '3'")


def test_the_rdma_server_and_client_lines_the_node_runs(tmp_path):
    """The real bash of scripts/lib/bandwidth.sh, with a stand-in ib_write_bw on PATH that prints its arguments."""
    fake = tmp_path / "ib_write_bw"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    lib = bash_lib("bandwidth")
    script = lib + "bw_server_args ib_write_bw 10.0.0.2 18515 3 roceP2p1s0f0 3\n"
    script += "bw_client ib_write_bw node img 10.0.0.2 18515 3 roceP2p1s0f0 3\n"
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=30, check=True)
    assert out.stdout.splitlines() == [
        "-d roceP2p1s0f0 -p 18515 -F --report_gbits -D 3 -x 3",
        "-d roceP2p1s0f0 -p 18515 -F --report_gbits -D 3 -x 3 10.0.0.2",
    ]


def test_an_iperf3_server_still_busy_with_the_last_run_is_asked_again_and_the_figures_read(tmp_path):
    """The real bash of bw_client with a stand-in iperf3: the `from` run right after the `to` run found the server
    still ending its test (`the server is busy running a test`) on a loaded machine, and preflight failed on it."""
    busy = tmp_path / "busy-once"
    fake = tmp_path / "iperf3"
    fake.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" -R "*) if [ ! -e "$BUSY" ]; then touch "$BUSY"\n'
        '  echo \'{"error": "the server is busy running a test. try again later"}\'; exit 1; fi ;; esac\n'
        'echo \'{"end": {"sum_received": {"bits_per_second": 9.4e9}}}\'\n'
    )
    fake.chmod(0o755)
    script = bash_lib("bandwidth") + "bw_client iperf3 node img 10.0.0.2 5201 3\n"
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "BUSY": str(busy)}
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=30, check=True)
    assert busy.exists() and bandwidth.iperf3_mbit(out.stdout) == {"to": 9400.0, "from": 9400.0}, out.stdout


def test_the_stop_ends_the_server_of_its_port_and_no_process_a_stale_pid_file_names(tmp_path):
    """The real bash of bw_stop on this machine: the server found by its port's pid file is ended; a pid file left by
    a killed run, naming another process since, ends nothing."""
    fake = tmp_path / "iperf3"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    port = 40000 + os.getpid() % 20000
    script = bash_lib("bandwidth") + (
        f"setsid timeout -k 2 30 iperf3 -s -p {port} >/dev/null 2>&1 </dev/null &\n"
        f"server=$!; echo $server > /tmp/spark-llm-bandwidth-{port}.pid\n"
        "sleep 30 & other=$!\n"
        "sleep 0.3\n"
        f"bw_stop node {port}\n"
        "sleep 0.3\n"
        'kill -0 $server 2>/dev/null && echo "server alive" || echo "server stopped"\n'
        f"echo $other > /tmp/spark-llm-bandwidth-{port}.pid\n"
        f"bw_stop node {port}\n"
        'kill -0 $other 2>/dev/null && echo "other alive" || echo "other stopped"\n'
        "kill $other\n"
        f"test -e /tmp/spark-llm-bandwidth-{port}.pid && echo 'pid file left' || echo 'pid file gone'\n"
    )
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=30, check=True)
    assert out.stdout.splitlines() == ["server stopped", "other alive", "pid file gone"], out.stderr
