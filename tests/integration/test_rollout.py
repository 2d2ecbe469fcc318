"""Ordered, incremental rollout on the sim (1 head + 1 worker), with the real pulumi CLI.

User story (the lifecycle): an operator previews (nothing runs on any node), deploys (the worker starts first, the
endpoint serves), re-runs `pulumi up` without changes (nothing happens on any node, one ssh connection each), and
tears down at the end (the head stopped before the worker); every address the stack uses is the sim's.

User stories from the seeds: a script edit is rolled out by recopying it and restarting the group in order; a
one-off crash is cured by running `pulumi up` again; a container killed after a good `up` is announced by `preview`
and restored by `up`. (A worker that crashes at start, which makes `pulumi up` fail with the worker's own log lines
and not a "Worker launched" that meant nothing: test_engines.py, for every engine.)
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Pulumi, SimCluster, complete, module_stack, project_copy, run
from tests.integration.profiles import assert_replaced_in_order, assert_untouched, launch_lines

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pulumi(sim_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pulumi]:
    """The sim stack of a checkout of this module's own: its tests edit the launch template there, as an operator
    edits theirs, and no other test worker's program reads the edit."""
    with module_stack(tmp_path_factory, project_copy(tmp_path_factory.mktemp("checkout"))) as cli:
        yield cli


FIRST_UP: list[str] = []


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi) -> Iterator[Pulumi]:
    FIRST_UP.append(pulumi.up().stdout)
    yield pulumi


def template(cli: Pulumi) -> Path:
    """The launch template of the checkout the stack runs from."""
    return cli.cwd / "scripts" / "launch.tmpl.sh"


def test_preview_plans_the_group_and_runs_nothing(pulumi, sim_cluster):
    out = pulumi("preview").stdout
    assert re.search(r"\+ \d+ to create", out) and "to update" not in out
    for node in ("head", "worker-1"):
        assert f"docker:index:Container spark-engine-{node} create" in out, out
    assert "[head]" not in out and "[worker-1]" not in out  # no remote command ran
    assert sim_cluster.node_exec("head", "docker", "ps", "-q").stdout.strip() == ""


def test_from_nothing_the_worker_starts_before_the_head_and_the_endpoint_answers(deployed, sim_cluster):
    assert launch_lines(FIRST_UP[0]) == ["worker-1", "head"]
    assert sim_cluster.started_at("worker-1") < sim_cluster.started_at("head")
    outputs = deployed.outputs()
    assert outputs["start_order"] == ["worker-1", "head"]
    assert complete(outputs)["usage"]["completion_tokens"] == 4


def test_second_up_changes_nothing_and_opens_one_ssh_connection_per_node(deployed, sim_cluster):
    before = {
        n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", "spark-llm-engine").stdout
        for n in ("head", "worker-1")
    }
    since = int(time.time()) + 1
    time.sleep(since - time.time())  # `docker logs --since` counts whole seconds: start on a fresh one
    out = deployed.up().stdout  # --skip-preview: one program run, so one read-only probe per node
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
    deployed("preview", "--expect-no-changes")


def test_stack_addresses_stay_inside_the_sim_networks(deployed, sim_cluster):
    """Nothing is sent anywhere but the sim's own containers: every address the stack uses is in their subnets."""
    subnets = []
    for net in ("mgmt", "fabric"):
        info = json.loads(run(["docker", "network", "inspect", f"{sim_cluster.prefix}-{net}"]).stdout)[0]
        subnets += [ipaddress.ip_network(c["Subnet"]) for c in info["IPAM"]["Config"]]
    endpoint_host = deployed.outputs()["endpoint"].split("//")[1].split(":")[0]
    addresses = [endpoint_host] + [a for n in sim_cluster.nodes() for a in (n["host"], n["fabricAddress"])]
    for address in addresses:
        assert any(ipaddress.ip_address(address) in s for s in subnets), address


def test_template_edit_recopies_the_script_and_restarts_the_group_in_order(deployed, sim_cluster):
    original = template(deployed).read_text()
    try:
        template(deployed).write_text(original + "# rollout test: an edit an operator makes\n")
        preview = deployed("preview").stdout
        for node in ("head", "worker-1"):
            assert f"spark-scripts-{node}-script replace" in preview, preview
            assert f"spark-scripts-{node}-env" not in preview  # unchanged env files are not recopied
        assert "spark-engine-worker-1 replace" in preview and "spark-engine-head replace" in preview

        out = deployed.up().stdout
        assert_replaced_in_order(out, ["worker-1"])
        # No weights or image bytes move for a script edit: their steps are untouched.
        assert_untouched(out, "spark-weights-", "spark-image-")
        assert "MB sent" not in out and "sent " not in out.replace("MB sent", "")
        script = sim_cluster.node_exec("worker-1", "cat", "/root/spark-llm/launch.sh").stdout
        assert script.endswith("# rollout test: an edit an operator makes\n")
    finally:
        template(deployed).write_text(original)
    # No `up` back to the committed template: the next tests' diffs and ups hold with this line deployed, and the
    # first of them that runs `up` deploys the template as committed.


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_preview_diff_shows_an_edited_line_of_the_launch_script_as_text(deployed):
    """`pulumi preview --diff` showed the launch script as one truncated base64 line, with its sha256 and size:
    reading the diff before a relaunch is what preview is for. The edited line now shows as itself, old and new;
    what the env file (a secret) holds stays out of the output."""
    original = template(deployed).read_text()
    old_line = 'die() { echo "launch.sh: $*" >&2; exit 1; }'
    new_line = 'die() { echo "launch.sh (diff test): $*" >&2; exit 1; }'
    assert original.count(old_line) == 1
    marker = uuid.uuid4().hex
    try:
        template(deployed).write_text(original.replace(old_line, new_line))
        deployed.set("engine.env.SPARK_LLM_DIFF_TEST", marker)
        result = deployed("preview", "--diff")
    finally:
        template(deployed).write_text(original)
        deployed.reset_config()
    out = ANSI.sub("", result.stdout)
    for node in ("head", "worker-1"):
        assert f"spark-scripts-{node}-script" in out, out
    changed = [line.strip() for line in out.splitlines() if "launch.sh (diff test)" in line or old_line in line]
    assert f"+ {new_line}" in changed, changed
    assert f"- {old_line}" in changed, changed
    assert marker not in out and marker not in result.stderr


def test_a_crash_that_happens_once_is_cured_by_running_up_again(deployed):
    marker = f"/root/.cache/crash-once-{uuid.uuid4().hex[:8]}"
    deployed.set("engine.env.STANDIN_CRASH_AT_INIT", "1")
    deployed.set("engine.env.STANDIN_CRASH_ONCE_FILE", marker)
    try:
        assert deployed.up(check=False).returncode != 0
        deployed.up()  # same config: only running `pulumi up` again
        assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
    finally:
        deployed.reset_config()
    # No `up` back to the plain config: the group serves as it is, and the next test's `up` deploys that config.


def test_a_killed_worker_is_announced_by_preview_and_restored_by_up(deployed, sim_cluster):
    sim_cluster.node_exec("worker-1", "docker", "rm", "-f", "spark-llm-engine")
    preview = deployed("preview").stdout
    assert "drift" in preview and "spark-engine-worker-1 replace" in preview and "spark-engine-head replace" in preview
    out = deployed.up().stdout
    assert out.index("spark-engine-worker-1 created replacement") < out.index("spark-engine-head created replacement")
    assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
    deployed("preview", "--expect-no-changes")


@pytest.mark.parametrize("how", [["rm", "-f"], ["stop"]], ids=["removed", "stopped"])
def test_with_refresh_a_removed_or_stopped_worker_restarts_the_group_head_first(deployed, sim_cluster, how):
    """`--refresh` lets the docker provider read each container: a removed worker drops out of state (a create,
    not a replace) and a stopped one reads as `mustRun: false`; the group still restarts head first."""
    sim_cluster.node_exec("worker-1", "docker", *how, "spark-llm-engine")
    preview = deployed("preview", "--refresh").stdout
    warning = next(line for line in preview.splitlines() if "drift in the engine group:" in line)
    assert "worker-1" in warning, warning
    assert re.search(r"spark-engine-worker-1 (create|replace)", preview) and "spark-engine-head replace" in preview
    out = deployed.up("--refresh").stdout
    stopped_head = out.index("spark-engine-stop-head created replacement")
    created_worker = re.search(r"Container spark-engine-worker-1 created( replacement)? \(", out)
    assert created_worker and stopped_head < created_worker.start() < out.index(
        "Container spark-engine-head created replacement"
    )
    assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
    deployed("preview", "--refresh", "--expect-no-changes")


def test_a_state_imported_from_before_the_last_up_is_named_older_than_the_nodes(deployed, tmp_path):
    """Issue 31, 10: after `pulumi stack import` of an older export, preview said nothing of the nodes running the
    newer revision already. It says so, and one `up` brings the state level."""
    old = tmp_path / "before.json"
    old.write_text(deployed("stack", "export").stdout)
    deployed.set("engine.env.IT_STATE", "newer")  # a newer revision, deployed: the nodes run it
    deployed.up()
    deployed("stack", "import", "--file", str(old))
    preview = deployed("preview", check=False)
    said = (preview.stdout + preview.stderr).replace("\n    ", " ")
    assert "(this config's), in containers this state does not record" in said, said[-3000:]
    assert "the state is older than the nodes (a `pulumi stack import` of an older export" in said
    deployed.up()
    deployed("preview", "--expect-no-changes")


def test_destroy_stops_the_head_before_the_worker(deployed, sim_cluster):
    out = deployed("destroy", "--yes", "--skip-preview").stdout
    assert out.index("Container spark-engine-head deleted") < out.index("Container spark-engine-worker-1 deleted")
    for node in ("head", "worker-1"):
        state = sim_cluster.node_exec(node, "docker", "ps", "-aq", "--filter", "name=spark-llm-engine")
        assert state.stdout.strip() == "", node
