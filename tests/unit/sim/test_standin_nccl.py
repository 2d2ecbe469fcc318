"""The stand-in prints NCCL-shaped transport lines during its distributed init (NCCL_DEBUG=INFO): NET/IB with the
devices its container has that NCCL_IB_HCA selects, and those only (as NCCL lists only the devices it opened), else
`NET/IB : No device found.` and NET/Socket; the socket-fallback knob forces the latter. The product's own reader
(spark_llm.plan.fabric_proof) reads them."""

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


def rdma_devices(tmp_path: Path, *names: str) -> dict[str, str]:
    """A container's /dev/infiniband with a uverbs device per name, named as `sim/sim roce on` names them; the env
    that points the stand-in there."""
    dev_dir = tmp_path / "infiniband"
    dev_dir.mkdir()
    (tmp_path / "names").write_text("".join(f"uverbs{i} {name}\n" for i, name in enumerate(names)))
    for i in range(len(names)):
        (dev_dir / f"uverbs{i}").touch()
    return {"STANDIN_RDMA_DEVICES_FILE": str(tmp_path / "names"), "STANDIN_NCCL_SOCKET_FILE": str(tmp_path / "knob")}


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
    devices = rdma_devices(tmp_path, *TWINS.split(","))
    knob = Path(devices["STANDIN_NCCL_SOCKET_FILE"])
    env = {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": TWINS, "NCCL_SOCKET_IFNAME": "eth0", "SGLANG_HOST_IP": "172.29.0.11"}
    lines, why = lines_of_rank_1(tmp_path / "infiniband", **env, **devices)
    assert why == ""
    assert lines[1].endswith(
        " [0] NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE [1]roceP2p1s0f0:1/RoCE [RO]; OOB eth0:172.29.0.11<0>"
    )
    record = fabric_records({"worker-1": "\n".join(lines)}, {}, tuple(TWINS.split(",")))["worker-1"]
    assert record["transport"] == "IB" and record["problem"] == ""

    knob.touch()  # the socket-fallback knob: no device found, sockets, as with a wrong NCCL_IB_HCA
    lines, why = lines_of_rank_1(tmp_path / "infiniband", **env, **devices)
    assert why == f"{knob} exists (the stand-in's socket-fallback knob)"
    record = fabric_records({"worker-1": "\n".join(lines)}, {}, tuple(TWINS.split(",")))["worker-1"]
    assert record["transport"] == "Socket" and record["line"] == "NET/Socket : Using [0]eth0:172.29.0.11<0>"


def test_nccl_ib_hca_naming_a_device_the_container_lacks_is_not_listed_as_real_nccl_lists_only_what_it_opened(
    tmp_path: Path,
):
    """Issue 41: the stand-in echoed NCCL_IB_HCA into its `NET/IB : Using` line, so a roceDevices entry no node had
    looked used on the sim."""
    devices = rdma_devices(tmp_path, *TWINS.split(","))
    env = {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "SGLANG_HOST_IP": "172.29.0.11", **devices}
    lines, why = lines_of_rank_1(tmp_path / "infiniband", NCCL_IB_HCA="rocep1s0f0,rocep9s0f9", **env)
    assert why == "" and lines[1].split("NCCL INFO ")[1] == (
        "NET/IB : Using [0]rocep1s0f0:1/RoCE [RO]; OOB eth0:172.29.0.11<0>"
    )
    record = fabric_records({"worker-1": "\n".join(lines)}, {}, ("rocep1s0f0", "rocep9s0f9"))["worker-1"]
    assert record["transport"] == "IB" and "but not rocep9s0f9" in record["problem"]

    lines, why = lines_of_rank_1(tmp_path / "infiniband", NCCL_IB_HCA="rocep9s0f9", **env)
    assert why == "NCCL_IB_HCA=rocep9s0f9 selects none of this container's rocep1s0f0, roceP2p1s0f0"
    assert lines[1].split("NCCL INFO ")[1] == "NET/IB : No device found."
    # NCCL's own selection: `^` excludes, `=` is a whole name, a bare name a prefix; unset, every device.
    for hca, listed in [("^=rocep1s0f0", "[0]roceP2p1s0f0:1"), ("=roce", None), ("", "[0]rocep1s0f0:1")]:
        lines, why = lines_of_rank_1(tmp_path / "infiniband", NCCL_IB_HCA=hca, **env)
        assert (listed is None) == bool(why) and (listed is None or f"NET/IB : Using {listed}/RoCE" in lines[1])


def test_without_verbs_devices_or_without_nccl_debug(tmp_path: Path):
    lines, why = lines_of_rank_1(tmp_path, NCCL_DEBUG="INFO", NCCL_IB_HCA=TWINS)
    assert why == f"{tmp_path} has no uverbs device in this container"
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
