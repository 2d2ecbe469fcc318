"""`pulumi preview/up/destroy --stack sim` with the project's own Pulumi CLI, end to end on the sim cluster.

User story: an operator previews, deploys, re-runs `pulumi up` without changes (nothing happens on any node),
and tears down; the endpoint serves completions in between.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
import urllib.request

import pytest

from tests.integration.conftest import REPO, run
from tests.integration.profiles import launch_lines

pytestmark = pytest.mark.integration


def _pinned_version() -> str:
    text = (REPO / "tools" / "versions.env").read_text()
    return re.search(r"^PULUMI_VERSION=(\S+)$", text, re.M).group(1)


def test_pulumi_cli_is_the_pinned_build():
    assert run(["pulumi", "version"]).stdout.strip() == f"v{_pinned_version()}"


def test_pulumi_lists_the_pinned_providers_and_its_own_python_language_host():
    text = (REPO / "tools" / "versions.env").read_text()
    pins = {k: re.search(rf"^{k}=(\S+)$", text, re.M).group(1) for k in ("COMMAND_VERSION", "DOCKER_VERSION")}
    plugins = json.loads(run(["pulumi", "plugin", "ls", "--json"]).stdout)
    listed = {(p["kind"], p["name"], p["version"]) for p in plugins}
    assert ("resource", "command", pins["COMMAND_VERSION"]) in listed
    assert ("resource", "docker", pins["DOCKER_VERSION"]) in listed
    about = run(["pulumi", "about"], cwd=REPO).stdout
    assert re.search(r"^language +python +3\.\d+\.\d+$", about, re.M), about
    assert re.search(r"^pulumi-command +" + re.escape(pins["COMMAND_VERSION"]) + "$", about, re.M), about
    # No file of the project speaks Pulumi's language-host protocol: the CLI runs Pulumi's own.
    assert not (REPO / "tools" / "langhost").exists()


def test_preview_plans_the_group_and_runs_nothing(pulumi, sim_cluster):
    out = pulumi("preview").stdout
    assert re.search(r"\+ \d+ to create", out) and "to update" not in out
    for node in ("head", "worker-1"):
        assert f"docker:index:Container spark-engine-{node} create" in out, out
    assert "[head]" not in out and "[worker-1]" not in out  # no remote command ran
    assert sim_cluster.node_exec("head", "docker", "ps", "-q").stdout.strip() == ""


def test_up_serves_a_completion_started_worker_first(pulumi, sim_cluster):
    out = pulumi.up().stdout
    assert launch_lines(out) == ["worker-1", "head"]
    assert sim_cluster.started_at("worker-1") < sim_cluster.started_at("head")
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


def test_second_up_changes_nothing_and_opens_one_ssh_connection_per_node(pulumi, sim_cluster):
    before = {
        n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", "spark-llm-engine").stdout
        for n in ("head", "worker-1")
    }
    since = int(time.time()) + 1
    time.sleep(since - time.time())  # `docker logs --since` counts whole seconds: start on a fresh one
    out = pulumi.up().stdout  # --skip-preview: one program run, so one read-only probe per node
    assert re.search(r"\n +\d+ unchanged", out) and not re.search(r"\d+ (created|updated|replaced|deleted)", out)
    assert "[head]" not in out and "[worker-1]" not in out
    for node in ("head", "worker-1"):
        # The node's sshd (PID 1 of the sim node, logging to stderr) says how many connections it accepted.
        log = run(["docker", "logs", "--since", str(since), sim_cluster.container(node)]).stderr
        assert log.count("Accepted publickey") <= 1, (node, log)
    after = {
        n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", "spark-llm-engine").stdout
        for n in ("head", "worker-1")
    }
    assert after == before
    pulumi("preview", "--expect-no-changes")


def test_a_state_imported_from_before_the_last_up_is_named_older_than_the_nodes(pulumi, tmp_path):
    """Issue 31, 10: after `pulumi stack import` of an older export, preview said nothing of the nodes running the
    newer revision already. It says so, and one `up` brings the state level."""
    old = tmp_path / "before.json"
    old.write_text(pulumi("stack", "export").stdout)
    pulumi.set("engine.env.IT_STATE", "newer")  # a newer revision, deployed: the nodes run it
    pulumi.up()
    pulumi("stack", "import", "--file", str(old))
    preview = pulumi("preview", check=False)
    said = (preview.stdout + preview.stderr).replace("\n    ", " ")
    assert "(this config's), in containers this state does not record" in said, said[-3000:]
    assert "the state is older than the nodes (a `pulumi stack import` of an older export" in said
    pulumi.up()
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
    assert out.index("Container spark-engine-head deleted") < out.index("Container spark-engine-worker-1 deleted")
    for node in ("head", "worker-1"):
        state = sim_cluster.node_exec(node, "docker", "ps", "-aq", "--filter", "name=spark-llm-engine")
        assert state.stdout.strip() == "", node
