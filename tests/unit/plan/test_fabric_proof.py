"""The fabric proof: each rank's transport read from NCCL's own lines (shapes from NVIDIA/nccl's source and a real
two-Spark log), judged against spark-llm:network.roceDevices, with the likely causes of a fallback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.group.fabric import fabric_outputs, fabric_records
from spark_llm.plan import deployment as plan
from spark_llm.plan.container import container_spec
from spark_llm.plan.fabric_proof import LINES_KEPT, causes_command, fallback_causes, nccl_lines_command
from spark_llm.plan.host_record import engine_nccl
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
    "Channel 01/0 : 1[0] -> 0[0] [receive] via NET/IBext_v10/1",
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


# NCCL 2.18 to 2.30, each line built from its format string (NVIDIA/nccl at the tag named). The `Using` list:
# `INFO(..., "NET/IB : Using%s %s; OOB %s:%s", line, RO ? "[RO]" : "", ...)`, each entry `" [%d]%s:%d/%s"`.
V2_18 = [
    "NCCL version 2.18.6+cuda12.2",
    # src/transport/net_ib.cc:259,264@v2.18.6-1 (the same at :259,264@v2.19.4-1)
    "NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>",
    "Using network IB",  # src/init.cc:310@v2.18.6-1
    # src/transport/net.cc:186,189,227@v2.18.6-1: `via NET/%s/%d%s%s`, `/%d(%d)%s%s` with the proxy rank
    "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",
    "Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1(1)/GDRDMA",
]
# 2.20-2.23 merge a NIC's ports into one net device and print it `" [%d]={"`, `"[%d] %s:%d/%s%s"` per member with
# ", " between, `"}"`: src/transport/net_ib.cc:313-330@v2.20.5-1, :521-538@v2.21.5-1, :573-590@v2.22.3-1,
# :652-669@v2.23.4-1. The channels index the merged device.
V2_20_MERGED = [
    "NET/IB : Using [0]={[0] rocep1s0f1:1/RoCE, [1] roceP2p1s0f1:1/RoCE} [RO]; OOB enp1s0f1np1:192.168.100.16<0>",
    "Using network IB",  # src/init.cc:322@v2.20.5-1, :342@v2.23.4-1
    "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",  # src/transport/net.cc:194,233@v2.23.4-1
    "Channel 01/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
]
# 2.24-2.28 list the physical devices and make a virtual device per device, then one per merge:
# `"NET/IB : Made virtual device [%d] name=%s speed=%d ndevs=%d"`, the name the members' joined by "+"
# (src/transport/net_ib.cc:540,668,672@v2.24.3-1; :595,758,762@v2.27.7-1; :649,835,839@v2.28.9-1).
V2_27_VIRTUAL = [
    "NCCL version 2.27.7+cuda13.0",
    "NET/IB : Made virtual device [0] name=rocep1s0f1 speed=100000 ndevs=1",
    "NET/IB : Made virtual device [1] name=roceP2p1s0f1 speed=100000 ndevs=1",
    "NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>",
    "NET/IB : Made virtual device [2] name=rocep1s0f1+roceP2p1s0f1 speed=200000 ndevs=2",
    "Using network IB",  # src/init.cc:346@v2.27.7-1
    # src/transport/net.cc:218,264@v2.27.7-1: `via NET/%s/%d%s%s%s` (/GDRDMA, (PCI), /Shared)
    "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/2/GDRDMA(PCI)/Shared",
]
# 2.24+ print the `Using` line with no device too, after `No device found.` (net_ib.cc:659,668,672@v2.24.3-1;
# src/transport/net_ib/init.cc:364,375,385@v2.29.7-1), then the sockets' (src/transport/net_socket.cc:59,63@v2.24.3-1,
# :73,77@v2.30.7-1: `" [%d]%s:%s"`).
V2_29_FALLBACK = [
    "NET/IB : No device found.",
    "NET/IB : Using [RO]; OOB enp1s0f1np1:192.168.100.17<0>",
    "NET/Socket : Using [0]enp1s0f1np1:192.168.100.17<0>",
    "Using network Socket",  # src/init.cc:457@v2.29.7-1
    "Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0",  # src/transport/net.cc:317@v2.29.7-1
]
# 2.30 may add the rail and the plane after the port: `" [%d]%s:%d"`, `":%d"` rail, `":%d"` plane, `"/%s"`
# (src/transport/net_ib/init.cc:494-504,513@v2.30.7-1).
V2_30_RAILS = [
    "NET/IB : Using [0]rocep1s0f1:1:0/RoCE [1]roceP2p1s0f1:1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>",
    "Using network IB",  # src/init.cc:486@v2.30.7-1
    "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA",  # src/transport/net.cc:324,377@v2.30.7-1
    "Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA",
]
# 2.28+ take a v10 plugin's name when they load it (src/plugin/net/net_v10.cc:108@v2.28.9-1, :122@v2.30.7-1), and
# nccl-rdma-sharp-plugins' is `NCCL RDMA Plugin v10` (src/p2p_plugin.c): the name is in every channel line too.
RDMA_PLUGIN = [
    "NET/IB : Using [0]rocep1s0f1:1/RoCE [1]roceP2p1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:192.168.100.16<0>",
    "Using network NCCL RDMA Plugin v10",
    "Channel 00/0 : 0[0] -> 1[0] [send] via NET/NCCL RDMA Plugin v10/0/GDRDMA",
    "Channel 01/0 : 1[0] -> 0[0] [receive] via NET/NCCL RDMA Plugin v10/1/GDRDMA",
]


@pytest.mark.parametrize(
    ("lines", "transport", "summary"),
    [
        (V2_18, "IB", "NET/IB rocep1s0f1,roceP2p1s0f1"),
        (V2_20_MERGED, "IB", "NET/IB rocep1s0f1,roceP2p1s0f1"),
        (V2_27_VIRTUAL, "IB", "NET/IB rocep1s0f1,roceP2p1s0f1"),
        (V2_30_RAILS, "IB", "NET/IB rocep1s0f1,roceP2p1s0f1"),
        (RDMA_PLUGIN, "IB", "NET/NCCL RDMA Plugin v10 rocep1s0f1,roceP2p1s0f1"),
    ],
    ids=["2.18-2.19", "2.20-2.23-merged-nic", "2.24-2.28-virtual-device", "2.30-rail-plane", "plugin-name-spaces"],
)
def test_both_twins_in_use_pass_in_every_nccl_versions_words(lines, transport, summary):
    record = fabric_records({"spark-1": log(lines)}, {}, TWINS)["spark-1"]
    assert (record["transport"], fabric_outputs({"spark-1": record})["spark-1"], record["problem"]) == (
        transport,
        summary,
        "",
    )


def test_a_fallback_in_2_24_and_later_words_names_the_sockets_not_an_empty_ib_list():
    record = fabric_records({"spark-2": log(V2_29_FALLBACK)}, {}, TWINS)["spark-2"]
    assert record["transport"] == "Socket" and record["devices"] == []
    assert record["problem"] == (
        "NCCL fell back to sockets (NET/IB : No device found., then NET/Socket : Using"
        " [0]enp1s0f1np1:192.168.100.17<0>) instead of RoCE over rocep1s0f1,roceP2p1s0f1"
    )


@pytest.mark.parametrize(
    ("lines", "idle"),
    [
        (IB[:4], "roceP2p1s0f1"),
        ([V2_18[1], V2_18[2], "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/1/GDRDMA"], "rocep1s0f1"),
        # After a merged entry the next entry is the next net device: [2]rocep1s0f0 is NET/IB/1.
        (
            [
                "NET/IB : Using [0]={[0] rocep1s0f1:1/RoCE, [1] roceP2p1s0f1:1/RoCE} [2]rocep1s0f0:1/RoCE ; OOB x:1<0>",
                "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/1",
            ],
            "rocep1s0f1,roceP2p1s0f1",
        ),
    ],
    ids=["2.27-channels-on-device-0", "channels-on-device-1", "2.20-after-a-merged-entry"],
)
def test_channels_on_one_device_do_not_pass_as_both_twins(lines, idle):
    record = fabric_records({"spark-1": log(lines)}, {}, TWINS)["spark-1"]
    assert record["transport"] == "IB" and record["problem"].startswith("NCCL's channels all run over ")
    assert f", none over {idle} (half the link's lanes" in record["problem"]


def test_a_using_line_cut_at_nccls_line_buffer_still_names_the_devices_before_the_cut():
    # NCCL formats a line into 1024 bytes (src/debug.cc:169@v2.18.6-1, :286@v2.30.7-1): many merged NICs lose the end.
    cut = "NET/IB : Using [0]={[0] rocep1s0f1:1/RoCE, [1] roceP2p1s0f1:1/RoCE} [1]={[2] rocep1s0f0:1/RoCE, [3] roceP2p1"
    record = fabric_records({"n": log([cut, "Using network IB"])}, {}, TWINS)["n"]
    assert (record["transport"], record["devices"], record["problem"]) == ("IB", [*TWINS, "rocep1s0f0"], "")


def test_a_network_this_reader_cannot_place_is_unknown_not_a_guess():
    lines = [IB[1], "Using network AWS Libfabric", "Channel 00/0 : 0[0] -> 1[0] [send] via NET/AWS Libfabric/0"]
    record = fabric_records({"n": log(lines)}, {}, TWINS)["n"]
    assert (record["transport"], record["network"], record["problem"]) == ("unknown", "AWS Libfabric", "")
    assert fabric_outputs({"n": record}) == {"n": "unknown (NCCL's network AWS Libfabric)"}


# Answers `docker inspect -f '{{.State.StartedAt}}' C` with this run's start and `docker logs [--since T] C` with the
# lines Docker keeps for a container started again in place: the first run's (on sockets), then this run's.
FAKE_DOCKER = """#!/bin/bash
if [ "$1" = inspect ]; then echo 2026-12-05T03:39:11.5Z; exit 0; fi
[ "$2" = --since ] && [ "$3" = 2026-12-05T03:39:11.5Z ] || cat "$FIRST_RUN"
cat "$THIS_RUN"
"""


def read_on_node(tmp_path, first_run: str, this_run: str) -> str:
    """What `nccl_lines_command` prints on a node whose Docker is FAKE_DOCKER, run as run_script runs it."""
    (tmp_path / "docker").write_text(FAKE_DOCKER)
    (tmp_path / "docker").chmod(0o755)
    (tmp_path / "first").write_text(first_run)
    (tmp_path / "this").write_text(this_run)
    env = {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "FIRST_RUN": str(tmp_path / "first"),
        "THIS_RUN": str(tmp_path / "this"),
    }
    script = "set -euo pipefail\n" + nccl_lines_command("spark-llm-engine")
    run = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_log_read_is_this_runs_and_keeps_the_using_line_whatever_the_tail_cuts(tmp_path):
    # This run: IB on both twins, then more channel lines than the tail keeps (a long run's communicators).
    many = [f"Channel {i % 32:02d}/0 : 0[0] -> 1[0] [send] via NET/IB/{i % 2}" for i in range(LINES_KEPT + 100)]
    out = read_on_node(tmp_path, log(SOCKET) + "INFO: an engine line\n", log(IB) + log(many))
    assert "NET/Socket" not in out and "an engine line" not in out
    # The version and `Using` lines, then the last LINES_KEPT of the rest.
    assert out.splitlines()[:2] == [PREFIX + IB[0], PREFIX + IB[1]]
    assert out.splitlines()[2:] == [PREFIX + line for line in (IB[2:] + many)[-LINES_KEPT:]]
    record = fabric_records({"spark-1": out}, {}, TWINS)["spark-1"]
    assert (record["transport"], record["devices"], record["problem"]) == ("IB", list(TWINS), "")
    assert engine_nccl(out) == "2.27.7"


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


REAL_LOG = Path(__file__).resolve().parents[2] / "data" / "nccl" / "torch-2.11-nccl-2.28.9-two-hosts-socket.log"


def test_a_whole_log_of_a_real_nccl_run_is_read_end_to_end():
    """The whole output of a real two-rank NCCL start (tests/data/nccl/capture.py on a lent H100 machine: torch
    2.11, NCCL 2.28.9, each rank its own NCCL_HOSTID, so NCCL joined them over its network, and found no RDMA device
    there), every line as printed, both ranks interleaved as torchrun prints them: each rank's lines (its pid) read
    by the reader as one node's log. What the log says is what the proof says: both on sockets, through 2.24+'s empty
    `NET/IB : Using [RO]` line, with the version the host record reads."""
    text = REAL_LOG.read_text()
    ranks: dict[str, list[str]] = {}
    for line in text.splitlines():
        if " NCCL INFO " in line:
            ranks.setdefault(line.split(":")[1], []).append(line)
    assert len(ranks) == 2
    logs = {f"rank-{i}": "\n".join(lines) for i, lines in enumerate(ranks.values())}
    records = fabric_records(logs, {}, ("rocep1s0f1", "roceP2p1s0f1"))
    for node, record in records.items():
        assert record["transport"] == "Socket" and record["devices"] == [], (node, record)
        assert record["line"] == "NET/Socket : Using [0]eth0:192.0.2.2<0>"
        assert record["problem"].startswith("NCCL fell back to sockets (NET/IB : No device found., then NET/Socket")
    assert fabric_outputs(records) == {"rank-0": "NET/Socket eth0", "rank-1": "NET/Socket eth0"}
    assert engine_nccl(text) == "2.28.9"
