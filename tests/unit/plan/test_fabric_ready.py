"""Is each node's fabric ready for a start: with spark-llm:network.roceDevices, each named device on every node, ACTIVE
with an address, and /dev/infiniband there; the fabric interfaces' MTU spark-llm:network.mtu on every node. Each
fault names the node and the key, and says what to do; `pulumi preview` and `up` refuse on them (components.bootstrap),
preflight shows them in its rows (tests/unit/ops/preflight)."""

from __future__ import annotations

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan.fabric_ready import MTU_KEY, ROCE_KEY, fabric_faults, refusal
from spark_llm.plan.host_record import ABSENT
from spark_llm.plan.node_commands import StackRef

IF = "enp1s0f0np0"
TWINS = ["rocep1s0f0", "roceP2p1s0f0"]


def spark(**fields: str) -> dict[str, str]:
    """A Spark's host fields as the probe reads them now: both twins of its cabled port ACTIVE with GIDs, MTU 9000."""
    ready = {
        "roce_devices": "rocep1s0f0 rocep1s0f1 roceP2p1s0f0 roceP2p1s0f1",
        "verbs_devices": "uverbs0 uverbs1 uverbs2 uverbs3",
        "port_state.rocep1s0f0": "ACTIVE",
        "port_state.roceP2p1s0f0": "ACTIVE",
        "port_state.rocep1s0f1": "DOWN",
        "port_state.roceP2p1s0f1": "DOWN",
        "gids.rocep1s0f0": "fe80:0000:0000:0000:0000:0000:c0a8:c80c 0000:0000:0000:0000:0000:ffff:c0a8:c80c",
        "gids.roceP2p1s0f0": "fe80:0000:0000:0000:0000:0000:c0a8:c80c",
        f"mtu.{IF}": "9000",
    }
    return {**ready, **fields}


def build(raw, roce=TWINS, mtu=9000):
    raw["network"] = {"fabricInterfaces": [IF], "roceDevices": roce, "mtu": mtu}
    return plan.build_plan(groups(parse(raw))[0], plan.LAUNCH_TEMPLATE.read_text())


def test_two_ready_sparks_have_no_fault(raw_config):
    assert fabric_faults(build(raw_config), {"spark-1": spark(), "spark-2": spark()}) == []


@pytest.mark.parametrize(
    ("roce", "worker", "problem", "fix"),
    [
        (
            ["rocep1s0f0", "rocep9s0f9"],
            spark(),
            f"{ROCE_KEY} names rocep9s0f9, which spark-2 does not have (its /sys/class/infiniband lists rocep1s0f0,"
            " rocep1s0f1, roceP2p1s0f0, roceP2p1s0f1)",
            "name spark-2's ACTIVE RoCE devices there, both twins of the cabled port (`spark-llm exec spark-2 --"
            " ibdev2netdev` lists them with their state)",
        ),
        (
            TWINS,
            spark(**{"port_state.roceP2p1s0f0": "DOWN"}),
            f"spark-2's RoCE device roceP2p1s0f0 ({ROCE_KEY}) is DOWN, not ACTIVE: NCCL would not open it",
            "connect the cable of its port and bring the port up, or name the ACTIVE twins",
        ),
        (
            TWINS,
            spark(**{"port_state.rocep1s0f0": ABSENT}),
            f"spark-2's RoCE device rocep1s0f0 ({ROCE_KEY}) is in a state that cannot be read, not ACTIVE",
            "",
        ),
        (
            TWINS,
            spark(**{"gids.roceP2p1s0f0": ABSENT}),
            f"spark-2's RoCE device roceP2p1s0f0 ({ROCE_KEY}) is ACTIVE without an address (no GID on port 1)",
            "give its network interface an address",
        ),
        (
            TWINS,
            spark(verbs_devices=ABSENT),
            f"spark-2 has no /dev/infiniband, which {ROCE_KEY} mounts into its engine container: Docker would"
            " refuse to create it (after the group was stopped)",
            "load the node's RDMA drivers",
        ),
        (
            TWINS,
            spark(roce_devices=ABSENT),
            f"{ROCE_KEY} names rocep1s0f0, roceP2p1s0f0, and spark-2 has no RoCE device (/sys/class/infiniband lists"
            " none)",
            "load the node's RDMA drivers (`ls /sys/class/infiniband` lists the devices), or remove",
        ),
    ],
    ids=["missing", "down", "state-unread", "no-address", "no-dev-infiniband", "no-device-at-all"],
)
def test_a_device_fault_names_the_node_and_the_key(raw_config, roce, worker, problem, fix):
    faults = fabric_faults(build(raw_config, roce), {"spark-1": spark(), "spark-2": worker}, StackRef())
    assert {f.key for f in faults} == {ROCE_KEY}
    faults = [f for f in faults if f.node == "spark-2"]  # (the head lacks rocep9s0f9 too)
    assert faults[0].problem.startswith(problem), faults[0].problem
    assert faults[0].fix.startswith(fix)


def test_a_roce_devices_entry_with_nccls_port_suffix_is_judged_by_its_device(raw_config):
    p = build(raw_config, ["rocep1s0f0:1", "roceP2p1s0f0:1"])
    assert fabric_faults(p, {"spark-1": spark()}) == []
    (fault,) = fabric_faults(p, {"spark-1": spark(**{"port_state.rocep1s0f0": "DOWN"})})
    assert fault.subject == "rocep1s0f0"


def test_without_roce_devices_nccl_runs_over_sockets_and_no_device_is_asked_for(raw_config):
    assert fabric_faults(build(raw_config, []), {"spark-1": spark(roce_devices=ABSENT, verbs_devices=ABSENT)}) == []


def test_mtus_set_apart_are_refused_when_the_key_names_one_of_them(raw_config):
    """The issue's case: 9000 on one node, 1500 on the other, network.mtu 1500: the node at 9000 is named."""
    hosts = {"spark-1": spark(**{f"mtu.{IF}": "1500"}), "spark-2": spark()}
    (fault,) = fabric_faults(build(raw_config, [], mtu=1500), hosts, StackRef("dual-spark"))
    assert (fault.node, fault.key, fault.subject) == ("spark-2", MTU_KEY, IF)
    assert fault.problem == f"spark-2's {IF} has MTU 9000, {MTU_KEY} is 1500 (spark-1's {IF} 1500)"
    assert fault.fix == (
        f"set MTU 1500 there (`spark-llm exec --stack dual-spark spark-2 -- sudo ip link set {IF} mtu 1500`, and"
        f" persist it), or one MTU on every node and in {MTU_KEY}"
    )


def test_nodes_that_agree_on_another_mtu_than_the_key_are_each_named_and_the_key_is_the_fix(raw_config):
    hosts = {"spark-1": spark(**{f"mtu.{IF}": "1500"}), "spark-2": spark(**{f"mtu.{IF}": "1500"})}
    faults = fabric_faults(build(raw_config, TWINS, mtu=9000), hosts)
    assert [(f.node, f.key) for f in faults] == [("spark-1", MTU_KEY), ("spark-2", MTU_KEY)]
    assert faults[0].fix.startswith(f"set {MTU_KEY} to 1500, the MTU the nodes have, or set 9000 on each")


def test_an_interface_a_node_lacks_and_a_node_not_read_are_left_to_their_own_checks(raw_config):
    # The interface is preflight's `interfaces` row; a node that cannot be read is named by the program already.
    hosts = {"spark-1": spark(**{f"mtu.{IF}": ABSENT})}
    assert fabric_faults(build(raw_config, TWINS, mtu=1500), hosts) == []


def test_the_refusal_lists_every_fault_node_by_node_and_says_nothing_ran(raw_config):
    hosts = {"spark-1": spark(**{f"mtu.{IF}": "1500"}), "spark-2": spark(verbs_devices=ABSENT)}
    faults = fabric_faults(build(raw_config, ["rocep1s0f0", "rocep9s0f9"], mtu=1500), hosts)
    assert [(f.node, f.subject) for f in faults] == [
        ("spark-1", "rocep9s0f9"),
        ("spark-2", "/dev/infiniband"),
        ("spark-2", "rocep9s0f9"),
        ("spark-2", IF),
    ]
    lines = refusal(faults).splitlines()
    assert lines[0] == f"{faults[0].problem}: {faults[0].fix}"
    assert lines[-1] == (
        "Nothing was run on any node (no engine was stopped). Fix it, then run `pulumi preview` again."
    )
