"""spark-llm:network.firewall: the table that refuses the group's ports beyond the fabric (what it admits first:
ssh, the fabric, replies, the API where engine.host says), and the warning of preview while it is off."""

from __future__ import annotations

import pytest

from spark_llm.config import ConfigError
from spark_llm.plan import firewall
from tests.unit.ops.node_facts import build

REFUSE = "reject with tcp reset"


@pytest.fixture
def raw(raw_config):
    raw_config["network"] = {"fabricInterfaces": ["enp1s0f0np0", "enP2p1s0f0np0"], "firewall": "fabric-only"}
    return raw_config


def rules(raw, node: str = "head") -> list[str]:
    plan = build(raw)
    target = plan.head if node == "head" else plan.workers[0]
    return [line.strip() for line in firewall.ruleset(plan, target).splitlines()]


def test_fabric_only_needs_the_fabric_interfaces_named(raw):
    raw["network"] = {"firewall": "fabric-only"}
    with pytest.raises(
        ConfigError, match=r"spark-llm:network.fabricInterfaces: .*name them \(e.g. \[\"enp1s0f0np0\"\]\)"
    ):
        build(raw)


def test_the_rendezvous_and_the_ephemeral_ports_are_refused_after_ssh_the_fabric_and_replies(raw):
    got = rules(raw)
    assert got.index('iifname { "enp1s0f0np0", "enP2p1s0f0np0" } accept') < got.index(
        f'tcp dport 20000 {REFUSE} comment "engine.distPort: the torch rendezvous"'
    )
    order = [
        next(i for i, r in enumerate(got) if r.startswith(p))
        for p in (
            'iif "lo" accept',
            "iifname",
            "ct state established,related accept",
            "tcp dport 22 accept",
            "tcp dport 20000 reject",
            "tcp dport $ephemeral reject",
        )
    ]
    assert order == sorted(order)
    assert "type filter hook input priority filter; policy accept;" in got
    assert not any("6379" in r for r in got)  # no Ray without the Ray executor


def test_with_ray_its_fixed_ports_are_refused_too(raw):
    raw["engine"] = {**raw.get("engine", {}), "kind": "vllm", "executor": "ray"}
    got = rules(raw, "worker")
    for port in ("6379", "10001", "10002-19999", "52365"):
        assert any(r.startswith(f"tcp dport {port} {REFUSE}") for r in got), port


def test_the_api_is_admitted_everywhere_with_the_default_host_and_only_on_the_head(raw):
    assert 'tcp dport 30000 accept comment "engine.port: the API, on every address (engine.host)"' in rules(raw)
    assert not any("30000" in r for r in rules(raw, "worker"))


def test_the_api_at_one_address_is_refused_at_the_others(raw):
    raw["engine"] = {**raw.get("engine", {}), "host": "10.1.230.180"}
    got = rules(raw)
    accept = got.index('ip daddr 10.1.230.180 tcp dport 30000 accept comment "engine.port: the API at engine.host"')
    assert got[accept + 1] == f'tcp dport 30000 {REFUSE} comment "engine.port: not at engine.host"'


def test_the_step_installs_the_table_records_its_digest_and_removes_both_as_its_delete(raw):
    plan = build(raw)
    rules = firewall.steps(plan)
    assert set(rules) == {"spark-1", "spark-2"}
    script = firewall.step_script(plan.head, rules["spark-1"], "tok")
    assert "fw_install spark-llm <<'SPARK_LLM_RULES'\ntable inet spark-llm {" in script
    recorded = "/home/aurora/spark-llm/state/firewall"
    assert f'printf "%s %s\\n" tok "$(fw_digest spark-llm)" > {recorded}.tmp' in script
    assert f"  fw_remove spark-llm\n  rm -f {recorded}\n" in script
    raw["network"]["firewall"] = "off"
    assert firewall.steps(build(raw)) == {}


HEAD_FACTS = {
    firewall.LISTEN_SECTION: (
        "0.0.0.0:22 0.0.0.0:20000 0.0.0.0:30000 127.0.0.1:45123 127.0.0.11:46253 192.168.200.12:40111 [::]:22"
    ),
    firewall.ADDRS_SECTION: "lo=127.0.0.1/8 enp1s0f0np0=192.168.200.12/24 wlP9s9=10.1.230.180/24 docker0=172.17.0.1/16",
    firewall.EPHEMERAL_SECTION: "32768-60999",
}


def test_preview_warns_while_off_naming_the_ports_reachable_beyond_the_fabric(raw):
    raw["network"]["firewall"] = "off"
    plan = build(raw)
    warning = firewall.exposure_warning(plan, plan.head, HEAD_FACTS)
    assert warning is not None
    assert warning.startswith("spark-llm:network.firewall is off: on spark-1 the group's ports listen beyond")
    assert "where wlP9s9 10.1.230.180 can be reached: 0.0.0.0:20000 (engine.distPort: the torch rendezvous)." in warning
    assert "pulumi config set --path network.firewall fabric-only" in warning
    # Loopback, the fabric's own address, ssh and the API are not the group's ports beyond the fabric.
    assert (
        "45123" not in warning
        and "46253" not in warning
        and "40111" not in warning
        and ":22 " not in warning
        and "30000" not in warning
    )


def test_no_warning_when_the_node_has_only_the_fabric_or_the_firewall_is_on(raw):
    plan = build(raw)
    assert firewall.exposure_warning(plan, plan.head, HEAD_FACTS) is None
    raw["network"]["firewall"] = "off"
    plan = build(raw)
    only_fabric = {**HEAD_FACTS, firewall.ADDRS_SECTION: "lo=127.0.0.1/8 enp1s0f0np0=192.168.200.12/24"}
    assert firewall.exposure_warning(plan, plan.head, only_fabric) is None


def test_the_warning_names_the_fixed_ports_before_the_ranges(raw):
    raw["network"]["firewall"] = "off"
    raw["engine"] = {**raw.get("engine", {}), "kind": "vllm", "executor": "ray"}
    plan = build(raw)
    listening = " ".join(f"0.0.0.0:{p}" for p in (45517, 42251, 12902, 19929, 16398, 6379, 52365))
    warning = firewall.exposure_warning(plan, plan.head, {**HEAD_FACTS, firewall.LISTEN_SECTION: listening})
    assert warning is not None
    assert "0.0.0.0:6379 (Ray's GCS), 0.0.0.0:12902 (Ray's worker processes), 0.0.0.0:16398" in warning
    assert warning.count("0.0.0.0:") == 6 and "and 1 more." in warning


@pytest.mark.parametrize(
    ("seen", "live"),
    [("3f2a9c0d11e4b5a6", "3f2a9c0d11e4b5a6"), ("absent", None), ("unknown", "recorded"), (None, "recorded")],
)
def test_the_tables_live_value_is_its_digest_gone_when_absent_and_unchallenged_when_unknown(seen, live):
    facts = {} if seen is None else {firewall.TABLE_SECTION: seen}
    assert firewall.live_value(facts, "recorded") == live
