"""`pulumi preview/up/destroy --stack sim` with the project's own Pulumi CLI, end to end on the sim cluster.

User story: an operator previews, deploys, re-runs `pulumi up` without changes (nothing happens on any node),
and tears down; the endpoint serves completions in between.
"""

from __future__ import annotations

import ipaddress
import json
import re
import urllib.request

import pytest

from tests.integration.conftest import REPO, run

pytestmark = pytest.mark.integration


def _pinned_version() -> str:
    text = (REPO / "tools" / "versions.env").read_text()
    return re.search(r"^PULUMI_VERSION=(\S+)$", text, re.M).group(1)


def test_pulumi_cli_is_the_pinned_build():
    assert run(["pulumi", "version"]).stdout.strip() == f"v{_pinned_version()}"


def test_preview_plans_the_group_and_runs_nothing(pulumi, sim_cluster):
    out = pulumi("preview").stdout
    assert "+ 25 to create" in out
    assert "[head]" not in out and "[worker-1]" not in out  # no remote command ran
    assert sim_cluster.node_exec("head", "docker", "ps", "-q").stdout.strip() == ""


def test_up_serves_a_completion_started_worker_first(pulumi, sim_cluster):
    out = pulumi.up().stdout
    assert out.index("starting spark-llm-engine on worker-1") < out.index("starting spark-llm-engine on head")
    outputs = pulumi.outputs()
    assert outputs["start_order"] == ["worker-1", "head"]
    body = json.dumps({"model": outputs["model"], "prompt": "hello", "max_tokens": 8}).encode()
    request = urllib.request.Request(
        outputs["endpoint"] + "/v1/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        completion = json.load(response)
    assert completion["choices"][0]["text"].strip()
    assert completion["usage"]["completion_tokens"] == 8


def test_second_up_changes_nothing_and_runs_no_command(pulumi, sim_cluster):
    before = {
        n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", "spark-llm-engine").stdout
        for n in ("head", "worker-1")
    }
    out = pulumi.up().stdout
    assert "25 unchanged" in out
    assert "[head]" not in out and "[worker-1]" not in out
    after = {
        n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", "spark-llm-engine").stdout
        for n in ("head", "worker-1")
    }
    assert after == before
    pulumi("preview", "--expect-no-changes")


def test_stack_addresses_stay_inside_the_sim_networks(pulumi, sim_cluster):
    """Nothing is sent anywhere but the sim's own containers: every address the stack uses is in their subnets."""
    subnets = []
    for net in ("mgmt", "fabric"):
        info = json.loads(run(["docker", "network", "inspect", f"{sim_cluster.prefix}-{net}"]).stdout)[0]
        subnets += [ipaddress.ip_network(c["Subnet"]) for c in info["IPAM"]["Config"]]
    endpoint_host = pulumi.outputs()["endpoint"].split("//")[1].split(":")[0]
    addresses = [endpoint_host] + [a for n in sim_cluster.nodes() for a in (n["host"], n["fabricAddress"])]
    for address in addresses:
        assert any(ipaddress.ip_address(address) in s for s in subnets), address


def test_destroy_stops_the_head_before_the_worker(pulumi, sim_cluster):
    out = pulumi("destroy", "--yes", "--skip-preview").stdout
    assert out.index("spark-engine-head deleted") < out.index("spark-engine-worker-1 deleted")
    for node in ("head", "worker-1"):
        state = sim_cluster.node_exec(node, "docker", "ps", "-aq", "--filter", "name=spark-llm-engine")
        assert state.stdout.strip() == "", node
