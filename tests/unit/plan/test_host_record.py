"""The host as it was when it last worked: the fields a node shows (read by the real bash on this machine), the
NCCL version from the engine's log, what changed since (node, field, old -> new), and the recorded fingerprint."""

from __future__ import annotations

import subprocess

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan.host_record import (
    ABSENT,
    changes_warning,
    engine_nccl,
    fingerprint_lines,
    host_changes,
    host_probe,
    last_served,
    parse_host_lines,
)

IF = "enp1s0f0np0"


def spark(gid: str) -> dict[str, str]:
    """A Spark as the gate records it (a plausible record: versions of late 2026, not read from real nodes)."""
    return {
        "kernel": "6.17.0-1032-nvidia",
        "nvidia_driver": "580.95.05",
        "cuda": "13.0",
        "nccl": "2.27.7",
        "roce_devices": "rocep1s0f0 rocep1s0f1 roceP2p1s0f0 roceP2p1s0f1",
        "verbs_devices": "uverbs0 uverbs1 uverbs2 uverbs3",
        "docker": "28.3.3",
        "nvidia_container_runtime": "NVIDIA Container Runtime version 1.17.8",
        "image": "sha256:9c4e1b7d2a6f03e58b1d4c7a9e2f6b3d8a5c1e7f4b2d9a6c3e8f1b5d7a2c4e6f",
        "gids.roceP2p1s0f0": f"0000:0000:0000:0000:0000:ffff:{gid}",
        "gids.rocep1s0f0": f"0000:0000:0000:0000:0000:ffff:{gid}",
        "port_state.roceP2p1s0f0": "ACTIVE",
        "port_state.rocep1s0f0": "ACTIVE",
        f"mtu.{IF}": "9000",
        f"nic_driver.{IF}": "mlx5_core 6.17.0-1032-nvidia",
        f"nic_firmware.{IF}": "28.45.1200 (NVD0000000087)",
    }


SPARK_2 = spark("c0a8:c80d")


def build(raw):
    return plan.build_plan(groups(parse(raw))[0], plan.LAUNCH_TEMPLATE.read_text())


def test_the_probe_runs_under_strict_bash_on_a_host_without_a_gpu_and_names_what_it_found(raw_config):
    # This machine: no NVIDIA driver, no /sys/class/infiniband, perhaps no docker. Absent fields never fail the probe.
    script = "set -euo pipefail\n" + host_probe(build(raw_config)) + "echo done\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.endswith("done\n")
    fields = parse_host_lines(out)
    with open("/proc/sys/kernel/osrelease") as f:
        assert fields["kernel"] == f.read().strip()
    assert fields["nvidia_driver"] == ABSENT and fields["roce_devices"] == ABSENT and "nccl" not in fields
    assert fields["verbs_devices"] == ABSENT


def test_the_nccl_version_comes_from_the_engines_own_line():
    assert engine_nccl("spark-1:1:1 [0] NCCL INFO NCCL version 2.27.7+cuda13.0\n") == "2.27.7"
    assert engine_nccl("(EngineCore pid=7) INFO [pynccl.py:103] vLLM is using nccl==2.28.9\n") == "2.28.9"
    assert engine_nccl("no such line") == ABSENT


def test_what_changed_since_the_start_that_served_is_named_by_node_field_old_and_new():
    now = {**SPARK_2, "kernel": "7.0.0-1019-nvidia", "nccl": "2.28.9"}
    del now["cuda"]
    changes = host_changes({"spark-1": SPARK_2, "spark-2": SPARK_2}, {"spark-2": now, "spark-3": now})
    # The NCCL version is the engine's (read at the next start), not the host's; a node never recorded is not named.
    assert [str(c) for c in changes] == [
        "spark-2: cuda 13.0 -> absent",
        "spark-2: kernel 6.17.0-1032-nvidia -> 7.0.0-1019-nvidia",
    ]
    warning = changes_warning(changes, "2026-12-04T21:10:03+00:00")
    assert warning.startswith("the hosts changed since the last start that served (2026-12-04T21:10:03+00:00): ")
    assert host_changes({"spark-2": SPARK_2}, {"spark-2": dict(SPARK_2)}) == []
    # No engine container now (destroyed, or never started here): its image is not a change of the host.
    assert host_changes({"spark-2": SPARK_2}, {"spark-2": {**SPARK_2, "image": ABSENT}}) == []
    new_image = {**SPARK_2, "image": "sha256:0b1c"}
    assert [str(c) for c in host_changes({"spark-2": SPARK_2}, {"spark-2": new_image})] == [
        f"spark-2: image {SPARK_2['image']} -> sha256:0b1c"
    ]


def test_a_port_gone_down_is_a_change_and_a_record_made_before_port_states_were_read_is_not():
    down = {**SPARK_2, "port_state.rocep1s0f0": "DOWN"}
    assert [str(c) for c in host_changes({"spark-2": SPARK_2}, {"spark-2": down})] == [
        "spark-2: port_state.rocep1s0f0 ACTIVE -> DOWN"
    ]
    older = {k: v for k, v in SPARK_2.items() if not k.startswith("port_state.")}
    assert host_changes({"spark-2": older}, {"spark-2": SPARK_2}) == []


def test_the_last_start_that_served_is_read_from_its_history_line():
    assert last_served('{"at": "x", "hosts": {"spark-1": {"kernel": "k"}}}') == {
        "at": "x",
        "hosts": {"spark-1": {"kernel": "k"}},
    }
    assert last_served("") is None and last_served('{"at": "x"}') is None and last_served("not json") is None


def test_the_fingerprint_lists_the_fields_in_reading_order():
    lines = fingerprint_lines({"at": "2026-12-04T21:10:03+00:00", "hosts": {"spark-2": SPARK_2}})
    assert lines[:4] == [
        "hosts at the last start that served (2026-12-04T21:10:03+00:00):",
        "  spark-2:",
        "    kernel: 6.17.0-1032-nvidia",
        "    nvidia_driver: 580.95.05",
    ]
    assert lines[-1] == "    port_state.rocep1s0f0: ACTIVE"
