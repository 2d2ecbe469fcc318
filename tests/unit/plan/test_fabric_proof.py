"""The fabric proof: each rank's transport read from NCCL's own lines (shapes from NVIDIA/nccl's source and a real
two-Spark log), judged against spark-llm:network.roceDevices, with the likely causes of a fallback."""

from __future__ import annotations

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan.container import container_spec
from spark_llm.plan.fabric_proof import (
    causes_command,
    fabric_outputs,
    fabric_records,
    fallback_causes,
    nccl_lines_command,
)
from spark_llm.plan.readiness import readiness_spec
from spark_llm.plan.start.timeline import timeline_lines

TWINS = ("rocep1s0f1", "roceP2p1s0f1")
PREFIX = "spark-1:2741:2741 [0] NCCL INFO "
# A real two-Spark line (notes/real-sparks.md), then the communicator's and a channel's.
IB = [
    "NCCL version 2.27.7+cuda13.0",
    "NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>",
    "Using network IB",
    "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0",
    "Channel 01/0 : 1[0] -> 0[0] [receive] via NET/IB/1",
]
SOCKET = [
    "NET/IB : No device found.",
    "NET/Socket : Using [0]enp1s0f1np1:192.168.100.17<0>",
    "Using network Socket",
    "Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0",
]
# NGC images with the HPC-X plugin.
IBEXT = [
    "NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>",
    "Using network IBext_v10",
    "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IBext_v10/0",
]
ONE_TWIN = ["NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>", "Using network IB"]


def log(lines: list[str]) -> str:
    return "".join(PREFIX + line + "\n" for line in lines)


@pytest.mark.parametrize(
    ("lines", "transport", "summary", "problem"),
    [
        (IB, "IB", "NET/IB rocep1s0f1,roceP2p1s0f1", ""),
        (IBEXT, "IB", "NET/IBext_v10 rocep1s0f1,roceP2p1s0f1", ""),
        (SOCKET, "Socket", "NET/Socket enp1s0f1np1", "NCCL fell back to sockets (NET/IB : No device found., then"),
        (ONE_TWIN, "IB", "NET/IB rocep1s0f1", "NCCL uses rocep1s0f1 but not roceP2p1s0f1"),
        (["NET/Socket : Using [0]enp1s0f1np1:192.168.100.17<0>"], "Socket", "NET/Socket enp1s0f1np1", "NCCL fell back"),
        ([], "unknown", "unknown (no NCCL network line in its log)", ""),
    ],
    ids=["ib", "ibext-ngc", "socket-fallback", "one-twin-only", "socket-line-only", "no-lines"],
)
def test_each_ranks_transport_is_read_from_its_own_nccl_lines(lines, transport, summary, problem):
    record = fabric_records({"spark-2": log(lines)}, {}, TWINS)["spark-2"]
    assert record["transport"] == transport
    assert fabric_outputs({"spark-2": record}) == {"spark-2": summary}
    assert record["problem"].startswith(problem) and bool(record["problem"]) == bool(problem)


def test_using_network_decides_when_nccl_printed_both_plugins_lines():
    # NCCL may initialise the socket plugin too; the communicator's `Using network` is what it chose.
    record = fabric_records({"n": log([IB[1], SOCKET[1], "Using network IB"])}, {}, TWINS)["n"]
    assert record["transport"] == "IB" and record["line"].startswith("NET/IB : Using [0]rocep1s0f1:1/RoCE")


def test_lines_ray_relays_into_the_heads_log_are_the_tagged_workers():
    relayed = "".join(f"(RayWorkerWrapper pid=311, ip=192.168.100.17) {PREFIX}{line}\n" for line in SOCKET)
    records = fabric_records({"spark-1": log(IB) + relayed, "spark-2": ""}, {"spark-2": "192.168.100.17"}, TWINS)
    assert records["spark-1"]["transport"] == "IB"
    assert records["spark-2"]["transport"] == "Socket"


def test_the_log_read_keeps_only_the_transport_and_version_lines():
    script = nccl_lines_command("spark-llm-engine")
    assert script.startswith("docker logs spark-llm-engine 2>&1 | { grep -aE ")
    assert "vLLM is using nccl==" in script and "tail -n 400" in script


SIM_FACTS = (
    "sys_devices\t\ncontainer_devices\tuverbs0 uverbs1 \nmemlock\t8388608\n"
    "env\tNCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1 NCCL_SOCKET_IFNAME=eth0 \n"
)
SPARK_FACTS = (
    "sys_devices\trocep1s0f0 rocep1s0f1 roceP2p1s0f0 roceP2p1s0f1 \ncontainer_devices\t\nmemlock\tunlimited\n"
    "env\tNCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1 NCCL_IB_GID_INDEX=3 NCCL_SOCKET_IFNAME=enp1s0f1np1 \n"
)


def test_a_fallback_names_the_likely_causes_the_node_shows():
    sim = fallback_causes("worker-1", SIM_FACTS, TWINS)
    assert sim[0].startswith(
        "NCCL_IB_HCA names rocep1s0f1,roceP2p1s0f1, which worker-1's /sys/class/infiniband does not list (it lists no"
        " RDMA device)"
    )
    assert sim[1].startswith("the container's memlock limit is 8388608 bytes, not unlimited")
    assert sim[-1].endswith("NCCL_SOCKET_IFNAME=eth0 (the OOB interface must be the fabric's)")
    spark = fallback_causes("spark-2", SPARK_FACTS, TWINS)
    assert spark[0] == "the engine's container has no /dev/infiniband (not mounted from the node)"
    assert "NCCL_IB_GID_INDEX=3" in spark[-1] and len(spark) == 2


def test_the_causes_script_is_read_only_and_takes_the_container_as_an_argument():
    script = causes_command("spark-llm-engine")
    assert script.startswith("bash -s -- spark-llm-engine <<'SPARK_LLM_CAUSES'\n")
    for word in ("docker rm", "docker stop", "docker kill", " > /", "rm -"):
        assert word not in script


def build(raw):
    return plan.build_plan(groups(parse(raw))[0], plan.LAUNCH_TEMPLATE.read_text())


def test_nccl_prints_its_transport_only_where_ib_is_expected(raw_config):
    # Without roceDevices NCCL's sockets are what was asked for, and a new variable would restart every group on
    # upgrade: no NCCL_DEBUG, no proof in the gate's spec.
    plain = build(raw_config)
    assert "NCCL_DEBUG" not in container_spec(plain, plain.head).env and "fabric" not in readiness_spec(plain)
    raw_config.setdefault("network", {})["roceDevices"] = list(TWINS)
    roce = build(raw_config)
    env = container_spec(roce, roce.workers[0]).env
    assert env["NCCL_DEBUG"] == "INFO" and env["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert readiness_spec(roce)["fabric"] == {"roce_devices": list(TWINS), "on_fallback": "fail"}
    raw_config["network"]["fabricProof"] = "warn"
    assert readiness_spec(build(raw_config))["fabric"]["on_fallback"] == "warn"


def test_status_shows_each_ranks_transport_under_its_phases():
    records = fabric_records({"spark-1": log(IB), "spark-2": log(SOCKET)}, {}, TWINS)
    timeline = {"revision": "abc", "at": "now", "gate_seconds": 1, "nodes": {"spark-1": [], "spark-2": []}}
    lines = timeline_lines({**timeline, "fabric": records})
    assert lines[1:] == [
        "  spark-1: no phases",
        "    fabric: NET/IB rocep1s0f1,roceP2p1s0f1",
        "  spark-2: no phases",
        "    fabric: NET/Socket enp1s0f1np1 (NCCL fell back to sockets (NET/IB : No device found., then NET/Socket :"
        " Using [0]enp1s0f1np1:192.168.100.17<0>) instead of RoCE over rocep1s0f1,roceP2p1s0f1)",
    ]


def test_with_ray_every_workers_nccl_lines_reach_the_heads_log_undeduplicated(raw_config):
    # Ray's dedup drops words with digits before comparing: every rank's `NET/IB : Using` line would read the same.
    raw_config["engine"] = {"kind": "vllm", "executor": "ray"}
    assert "RAY_DEDUP_LOGS" not in container_spec(build(raw_config), build(raw_config).head).env
    raw_config.setdefault("network", {})["roceDevices"] = list(TWINS)
    roce = build(raw_config)
    assert {container_spec(roce, n).env["RAY_DEDUP_LOGS"] for n in roce.nodes} == {"0"}
