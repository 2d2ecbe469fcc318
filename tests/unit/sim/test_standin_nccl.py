"""The stand-in prints NCCL-shaped transport lines during its distributed init (NCCL_DEBUG=INFO): NET/IB with the
NCCL_IB_HCA devices where its container has /dev/infiniband, else `NET/IB : No device found.` and NET/Socket; the
socket-fallback knob forces the latter. The product's own reader (spark_llm.plan.fabric_proof) reads them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from spark_llm.group.fabric import fabric_records
from tests.unit.sim.standin_group import WAIT_SECONDS, EngineGroup, engine_env

TWINS = "rocep1s0f0,roceP2p1s0f0"
LINES = """
import json, sys
from standin_engine.command_line import parse_launch
from standin_engine.nccl import nccl_lines
argv = ["--model-path", "/m", "--tp", "2", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:20000"]
config = parse_launch("sglang.launch_server", argv).config
print(json.dumps(nccl_lines(config, dict(__import__("os").environ), sys.argv[1])))
"""


def lines_of_rank_1(dev_dir: Path, **env: str) -> tuple[list[str], str]:
    out = subprocess.run(
        [sys.executable, "-c", LINES, str(dev_dir)],
        env=engine_env(env),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
        check=True,
    ).stdout
    lines, why = json.loads(out)
    return lines, why


def test_with_verbs_devices_and_nccl_ib_hca_a_rank_says_net_ib_with_those_devices(tmp_path: Path):
    (tmp_path / "uverbs0").touch()
    knob = tmp_path / "no-such-knob"
    env = {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": TWINS, "NCCL_SOCKET_IFNAME": "eth0", "SGLANG_HOST_IP": "172.29.0.11"}
    lines, why = lines_of_rank_1(tmp_path, **env, STANDIN_NCCL_SOCKET_FILE=str(knob))
    assert why == ""
    assert lines[1].endswith(
        " [0] NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE [1]roceP2p1s0f0:1/RoCE [RO]; OOB eth0:172.29.0.11<0>"
    )
    record = fabric_records({"worker-1": "\n".join(lines)}, {}, tuple(TWINS.split(",")))["worker-1"]
    assert record["transport"] == "IB" and record["problem"] == ""

    knob.touch()  # the socket-fallback knob: no device found, sockets, as with a wrong NCCL_IB_HCA
    lines, why = lines_of_rank_1(tmp_path, **env, STANDIN_NCCL_SOCKET_FILE=str(knob))
    assert why == f"{knob} exists (the stand-in's socket-fallback knob)"
    record = fabric_records({"worker-1": "\n".join(lines)}, {}, tuple(TWINS.split(",")))["worker-1"]
    assert record["transport"] == "Socket" and record["line"] == "NET/Socket : Using [0]eth0:172.29.0.11<0>"


def test_without_verbs_devices_or_without_nccl_debug(tmp_path: Path):
    lines, why = lines_of_rank_1(tmp_path, NCCL_DEBUG="INFO", NCCL_IB_HCA=TWINS)
    assert why == f"{tmp_path} is missing or empty in this container"
    assert [line.split("NCCL INFO ")[1] for line in lines[1:4]] == [
        "NET/IB : No device found.",
        "NET/Socket : Using [0]eth0:127.0.0.1<0>",
        "Using network Socket",
    ]
    assert lines_of_rank_1(tmp_path, NCCL_IB_HCA=TWINS) == ([], "")


def test_a_group_prints_them_during_its_distributed_init(new_group: Callable[..., EngineGroup]):
    group = new_group(2)
    env = {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": TWINS}
    group.start(0, env=env)
    worker = group.start(1, env=env)
    worker.wait_for_log("Init torch distributed ends.")
    log = worker.log()
    begin, end = log.index("Init torch distributed begin."), log.index("Init torch distributed ends.")
    assert begin < log.index("NCCL INFO Using network") < end
