"""The program's look at the nodes refuses a start whose fabric is not ready (spark_llm.plan.fabric_ready), at
`pulumi preview` as at `up` (the same program run), before any resource is declared: nothing stops.

Regression (issue 41): a spark-llm:network.roceDevices entry no node has, and nodes at MTU 9000 and 1500 with
spark-llm:network.mtu 1500, passed preview and `up`.
"""

from __future__ import annotations

import pulumi
import pytest

from components import bootstrap
from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.stack import StackPlan
from spark_llm.remote import observe

IF = "enp1s0f0np0"


def node(name: str, mtu: str) -> NodeObservation:
    """A node as the probe reads it: both twins ACTIVE with a GID, /dev/infiniband, its fabric interface's MTU."""
    facts = {
        "host.roce_devices": "rocep1s0f0 roceP2p1s0f0",
        "host.verbs_devices": "uverbs0 uverbs1",
        "host.port_state.rocep1s0f0": "ACTIVE",
        "host.port_state.roceP2p1s0f0": "ACTIVE",
        "host.gids.rocep1s0f0": "0000:0000:0000:0000:0000:ffff:c0a8:c80c",
        "host.gids.roceP2p1s0f0": "fe80:0000:0000:0000:0000:0000:c0a8:c80c",
        f"host.mtu.{IF}": mtu,
    }
    return NodeObservation(node=name, facts=facts)


@pytest.fixture
def looked_at(monkeypatch, raw_config):
    """observe_nodes of the dual-spark stack with `roce` and network.mtu 1500, over the nodes given, as preview."""

    def run(roce: list[str], seen: dict[str, NodeObservation], *, dry_run: bool = True):
        raw_config["network"] = {"fabricInterfaces": [IF], "roceDevices": roce, "mtu": 1500}
        p = plan.build_plan(groups(parse(raw_config))[0], plan.LAUNCH_TEMPLATE.read_text())
        monkeypatch.setattr(bootstrap, "under_mocks", lambda: False)
        monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: dry_run)
        monkeypatch.setattr(pulumi, "get_stack", lambda: "dual-spark")
        monkeypatch.setattr(pulumi.log, "error", lambda *a, **k: None)
        monkeypatch.setattr(observe, "observe_stack", lambda groups: [seen])
        return bootstrap.observe_nodes(StackPlan.one(p), [lambda _: ""])

    return run


@pytest.mark.parametrize("dry_run", [True, False], ids=["preview", "up"])
def test_a_device_no_node_has_and_mtus_set_apart_are_refused_naming_node_and_key(looked_at, dry_run):
    seen = {"spark-1": node("spark-1", "1500"), "spark-2": node("spark-2", "9000")}
    with pytest.raises(bootstrap.Refusal) as refused:
        looked_at(["rocep1s0f0", "rocep9s0f9"], seen, dry_run=dry_run)
    lines = str(refused.value).splitlines()
    assert lines[0].startswith(
        "spark-llm:network.roceDevices names rocep9s0f9, which spark-1 does not have (its /sys/class/infiniband lists"
        " rocep1s0f0, roceP2p1s0f0): name spark-1's ACTIVE RoCE devices there"
    )
    assert lines[1].startswith("spark-llm:network.roceDevices names rocep9s0f9, which spark-2 does not have")
    assert lines[2].startswith(
        f"spark-2's {IF} has MTU 9000, spark-llm:network.mtu is 1500 (spark-1's {IF} 1500): set MTU 1500 there"
        f" (`spark-llm exec --stack dual-spark spark-2 -- sudo ip link set {IF} mtu 1500`"
    )
    assert lines[3].startswith("Nothing was run on any node (no engine was stopped).")


def test_ready_nodes_go_on_to_the_deployment(looked_at):
    seen = {"spark-1": node("spark-1", "1500"), "spark-2": node("spark-2", "1500")}
    assert looked_at(["rocep1s0f0", "roceP2p1s0f0"], seen) == [seen]
