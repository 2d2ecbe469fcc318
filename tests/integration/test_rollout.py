"""Ordered, incremental rollout on the sim (1 head + 1 worker), with the real pulumi CLI.

User stories from the seeds: a script edit is rolled out by recopying it and restarting the group in order; a
one-off crash is cured by running `pulumi up` again; a container killed after a good `up` is announced by `preview`
and restored by `up`. (A worker that crashes at start, which makes `pulumi up` fail with the worker's own log lines
and not a "Worker launched" that meant nothing: test_engines.py, for every engine.)
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Pulumi, SimCluster, complete, module_stack, project_copy
from tests.integration.profiles import assert_replaced_in_order, assert_untouched

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def pulumi(sim_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pulumi]:
    """The sim stack of a checkout of this module's own: its tests edit the launch template there, as an operator
    edits theirs, and no other test worker's program reads the edit."""
    with module_stack(tmp_path_factory, project_copy(tmp_path_factory.mktemp("checkout"))) as cli:
        yield cli


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi) -> Iterator[Pulumi]:
    pulumi.up()
    yield pulumi


def template(cli: Pulumi) -> Path:
    """The launch template of the checkout the stack runs from."""
    return cli.cwd / "scripts" / "launch.tmpl.sh"


def test_from_nothing_the_worker_starts_before_the_head_and_the_endpoint_answers(deployed, sim_cluster):
    assert sim_cluster.started_at("worker-1") < sim_cluster.started_at("head")
    assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4


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
