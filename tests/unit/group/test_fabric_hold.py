"""spark_llm.group.fabric_ready as the supervisor applies it (issue 41, 2): a restart of its own is held, as `pulumi
preview` refuses a start, onto a RoCE device missing or not ACTIVE or a fabric MTU not spark-llm:network.mtu; the
head's fabric read from its mounted /sys, a worker's with the one request its key may make (scripts/supervisor_allow.sh
runs scripts/lib/host_record.sh's fabric_record, which reads the same fields: tests/unit/scripts)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from spark_llm.group.fabric_ready import FABRIC_REQUEST, NOT_READ, ZERO_GID, read_sysfs
from spark_llm.group.memory import MEMORY_REQUEST
from spark_llm.group.weights import RECORD_REQUEST
from tests.unit.group.test_weights import VERIFIED, one_poll_of_a_broken_group, supervisor_of

DEVICES = ("rocep1s0f0", "roceP2p1s0f0")
IFACE = "enp1s0f0np0"
GIB_KB = 1024**2


def fake_sysfs(root: Path, states: dict[str, str], mtu: int = 9000) -> Path:
    """A /sys with the fabric interface and the RoCE devices (port 1's state as the kernel writes it, `4: ACTIVE`)."""
    (root / "class" / "net" / IFACE).mkdir(parents=True)
    (root / "class" / "net" / IFACE / "mtu").write_text(f"{mtu}\n")
    for n, (dev, state) in enumerate(states.items()):
        port = root / "class" / "infiniband" / dev / "ports" / "1"
        (port / "gids").mkdir(parents=True)
        (port / "state").write_text(f"{state}\n")
        (port / "gids" / "0").write_text(f"fe80:0000:0000:0000:0000:0000:ac1d:{n:04x}\n")
        (port / "gids" / "1").write_text(f"{ZERO_GID}\n")
    return root


def test_the_head_is_read_from_its_mounted_sysfs_as_fabric_record_reads_a_node(tmp_path):
    sysfs = fake_sysfs(tmp_path, {DEVICES[0]: "4: ACTIVE", DEVICES[1]: "1: DOWN"})
    assert read_sysfs(str(sysfs), [IFACE, "absent0"]) == {
        f"mtu.{IFACE}": "9000",
        "port_state.roceP2p1s0f0": "DOWN",
        "gids.roceP2p1s0f0": "fe80:0000:0000:0000:0000:0000:ac1d:0001",
        "port_state.rocep1s0f0": "ACTIVE",
        "gids.rocep1s0f0": "fe80:0000:0000:0000:0000:0000:ac1d:0000",
        "roce_devices": "roceP2p1s0f0 rocep1s0f0",
        "verbs_devices": NOT_READ,
    }


def worker_fabric(states: dict[str, str], mtu: int) -> str:
    """What fabric_record prints on a worker with those port states and that MTU."""
    lines = [f"host.mtu.{IFACE}\t{mtu}"]
    for n, (dev, state) in enumerate(states.items()):
        lines += [f"host.port_state.{dev}\t{state}", f"host.gids.{dev}\tfe80::{n}"]
    return "\n".join([*lines, f"host.roce_devices\t{' '.join(states)}", "host.verbs_devices\tuverbs0 uverbs1", ""])


def supervisor_with_fabric(tmp_path: Path, worker_states: dict[str, str], worker_mtu: int = 9000):
    supervisor, asked = supervisor_of(tmp_path, VERIFIED, (0, VERIFIED, ""))
    sysfs = fake_sysfs(tmp_path / "head-sys", dict.fromkeys(DEVICES, "4: ACTIVE"))
    supervisor.spec["fabric_ready"] = {
        "roce_devices": list(DEVICES),
        "interfaces": [IFACE],
        "mtu": 9000,
        "sysfs": str(sysfs),
        "stack": "dual-spark",
    }
    memory = f"mem-info\tMemTotal={121 * GIB_KB} MemFree={110 * GIB_KB} MemAvailable={110 * GIB_KB}\n"
    answers = {
        RECORD_REQUEST: VERIFIED,
        MEMORY_REQUEST: memory,
        shlex.join([*FABRIC_REQUEST.split(), IFACE]): worker_fabric(worker_states, worker_mtu),
    }
    return supervisor, asked, answers


def test_a_broken_group_is_not_restarted_onto_a_down_port_and_the_state_says_which_and_what_to_do(
    tmp_path, monkeypatch
):
    """Restarted onto a port still down (a worker's cable, a port that comes up after the engine's container after
    a reboot), NCCL runs on sockets until the next restart. The supervisor waits, as preview refuses."""
    supervisor, asked, answers = supervisor_with_fabric(tmp_path, {DEVICES[0]: "ACTIVE", DEVICES[1]: "DOWN"})
    acted, state = one_poll_of_a_broken_group(supervisor, asked, answers, monkeypatch)
    assert acted == []  # nothing stopped, nothing started
    assert state["restarts"] == []  # no restart spent of its budget
    assert state["waiting"] == (
        "the fabric is not ready for a start: worker-1's RoCE device roceP2p1s0f0 (spark-llm:network.roceDevices) is"
        " DOWN, not ACTIVE: NCCL would not open it: connect the cable of its port and bring the port up, or name the"
        " ACTIVE twins (`spark-llm exec --stack dual-spark worker-1 -- ibdev2netdev` lists them with their state)"
    )


def test_a_worker_mtu_set_apart_holds_the_restart_and_a_ready_fabric_does_not(tmp_path, monkeypatch):
    supervisor, asked, answers = supervisor_with_fabric(tmp_path, dict.fromkeys(DEVICES, "ACTIVE"), worker_mtu=1500)
    acted, state = one_poll_of_a_broken_group(supervisor, asked, answers, monkeypatch)
    assert acted == [] and state["restarts"] == []
    assert state["waiting"].startswith(
        "the fabric is not ready for a start: worker-1's enp1s0f0np0 has MTU 1500, spark-llm:network.mtu is 9000"
        " (head's enp1s0f0np0 9000)"
    ), state["waiting"]

    # Both ports ACTIVE, one MTU: nothing holds the restart (and nothing is said of a fabric it could not read).
    (tmp_path / "ready").mkdir()
    ready, _, answers = supervisor_with_fabric(tmp_path / "ready", dict.fromkeys(DEVICES, "ACTIVE"))
    ready.members[1]._remote = lambda command, timeout=60: subprocess.CompletedProcess([], 0, answers[command], "")
    said: list[str] = []
    assert sys.modules["supervisor_node"].fabric_held(ready.members, ready.spec, said.append) is None
    assert said == []
