"""The node scripts the operator CLI runs (preflight's and status's): valid bash, their `capture` sections
parsed back, the fabric pings, and the API key kept off argv."""

from __future__ import annotations

import subprocess

import pytest

from spark_llm.ops.preflight import script as preflight_script
from spark_llm.ops.sections import SECTION_FUNCTION, Section, parse_sections
from spark_llm.ops.status import read as status_read
from spark_llm.plan.stack import StackPlan
from spark_llm.remote import runner
from tests.unit.ops.node_facts import build


def test_capture_sections_round_trip_through_bash():
    script = SECTION_FUNCTION + "capture a echo hi\ncapture b sh -c 'printf partial; exit 3'\ncapture c true\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    assert parse_sections(out) == {"a": Section(0, "hi"), "b": Section(3, "partial"), "c": Section(0, "")}


def test_a_section_cut_short_is_left_out():
    assert parse_sections("--- spark-llm:a ---\nhalf") == {}


@pytest.mark.parametrize("role", ["head", "worker"])
def test_node_scripts_are_valid_bash(spark_plan, role, tmp_path):
    node = spark_plan.head if role == "head" else spark_plan.workers[0]
    path = tmp_path / "facts.sh"
    path.write_text(
        runner.clock_script(preflight_script.node_script(StackPlan.one(spark_plan), node, check_flags=True))
    )
    subprocess.run(["bash", "-n", str(path)], check=True)
    path.write_text(status_read.node_script(spark_plan, node))
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_fabric_pings_fill_the_configured_mtu_from_both_sides(spark_plan):
    head = preflight_script.node_script(StackPlan.one(spark_plan), spark_plan.head, check_flags=False)
    worker = preflight_script.node_script(StackPlan.one(spark_plan), spark_plan.workers[0], check_flags=False)
    assert "capture fabric:spark-2 ping_mtu '192.168.200.13' 8972" in head
    assert "capture fabric:spark-1 ping_mtu '192.168.200.12' 8972" in worker
    assert "ping -n -q -M do -s" in head


def test_api_key_reaches_curl_through_a_descriptor_not_argv(raw_config):
    raw_config["apiKey"] = "sk-secret"
    script = status_read.node_script(build(raw_config), build(raw_config).head)
    assert "-H @<(printf 'Authorization: Bearer %s\\n' 'sk-secret')" in script
