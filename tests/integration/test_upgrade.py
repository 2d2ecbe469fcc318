"""An existing stack upgrades to this spark-llm without restarting an engine or copying a byte.

User story (several models): an operator deployed two models behind the router with the spark-llm of before the
stack's room (MODELS_BEFORE: each model made its own providers, the router its own, at the stack's root, and with
the supervisor on, a supervisor container per model), and pulls this version, whose groups and router stand under
one stack component on providers made once a node, with one supervisor for the stack. Preview shows no engine
container or member's stop step of either model changing; `pulumi up` restarts neither model's engines and moves no
weights; the second model's own supervisor is gone and the first's watches both; both models answer through the
router; the next preview is empty.

User story: an operator deployed with spark-llm as it was before the group's room (BEFORE: the verdict, the history
of starts, the supervisor's program and the readiness gate's entry point have moved since), the supervisor on, and
pulls this version. `pulumi preview` shows no engine container, stop step or image step changing; `pulumi up`
restarts no engine (the same containers, started at the same instant), rewrites no weights file (a weights step
whose program changed may run again and find nothing to copy), and the group serves; the supervisor runs the new
program (its files and container replaced); the next preview is empty.
"""

from __future__ import annotations

import dataclasses
import secrets
import subprocess
from pathlib import Path

import openai
import pytest
import yaml

from bench.steady_client import SMALL, two_models
from tests.integration.conftest import (
    PROGRAM_FILES,
    REPO,
    SIM,
    SimCluster,
    complete,
    module_stack,
    project_copy,
    run,
)
from tests.integration.profiles import assert_untouched, weights_on_nodes

pytestmark = pytest.mark.integration

MODELS_BEFORE = "1530184"
"""main before the stack's room (issue 40): the groups and the router at the stack's root, each with its providers."""
BEFORE = "ec51324"
"""main before issue 30 (the engine group's room): the last code an operator may have deployed with."""
NODES = ("head", "worker-1")
BIG = "spark-llm/standin-model"
MESSAGES: list = [{"role": "user", "content": "What does the fabric carry?"}]
# What an upgrade must leave alone: the engines, the steps that stop them, and the image. The weights fan-out's step
# runs again when its program changed (this upgrade: the rsync options now come from the plan), and must then find
# every worker's copy the head's and move nothing.
UNTOUCHED = ("spark-engine-head ", "spark-engine-worker-1 ", "spark-engine-stop-", "spark-image-")


def checkout(commit: str, directory: Path) -> Path:
    """The program as it was at `commit` (git archive of the files a Pulumi run reads), with this venv and sim."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, *PROGRAM_FILES], capture_output=True, check=True, timeout=120
    )
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True, timeout=120)
    for name in (".venv", "sim"):
        (directory / name).symlink_to(REPO / name)
    return directory


def engines(sim: SimCluster) -> dict[str, tuple[str, str]]:
    """Each node's engine container: its ID and when it started."""
    fmt = "{{.Id}} {{.State.StartedAt}}"
    found = {n: sim.node_exec(n, "docker", "inspect", "-f", fmt, "spark-llm-engine").stdout.split() for n in NODES}
    return {n: (ident, started) for n, (ident, started) in found.items()}


def supervisor_id(sim: SimCluster) -> str:
    return sim.node_exec("head", "docker", "inspect", "-f", "{{.Id}}", "spark-llm-supervisor").stdout.strip()


def test_a_stack_deployed_before_the_groups_room_upgrades_restarting_no_engine_and_moving_no_bytes(
    sim_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory
):
    before = checkout(BEFORE, tmp_path_factory.mktemp("checkout-before"))
    now = project_copy(tmp_path_factory.mktemp("checkout-now"))
    with module_stack(tmp_path_factory, before) as deployed:
        deployed.reset_config()
        deployed.set("supervisor.enabled", "true")
        deployed.up()
        running, weights = engines(sim_cluster), weights_on_nodes(sim_cluster)
        old_supervisor = supervisor_id(sim_cluster)
        digest = deployed.outputs()["weights_manifest_digest"]

        # The same stack, state and config, run by this version's program.
        upgraded = dataclasses.replace(deployed, cwd=now)
        preview = upgraded("preview").stdout
        assert_untouched(preview, *UNTOUCHED)
        out = upgraded.up().stdout
        assert_untouched(out, *UNTOUCHED)

        assert engines(sim_cluster) == running  # no engine restarted
        after = weights_on_nodes(sim_cluster)
        for node in NODES:  # no weights file rewritten or touched: the lines that differ, if any
            assert set(after[node].splitlines()) ^ set(weights[node].splitlines()) == set(), node
        assert upgraded.outputs()["weights_manifest_digest"] == digest
        # The supervisor is the new program: its files (with the group's room) replaced, its container new.
        assert supervisor_id(sim_cluster) != old_supervisor
        shipped = sim_cluster.node_exec("head", "sh", "-c", "ls /root/spark-llm/supervisor/spark_llm/group").stdout
        assert "verdict.py" in shipped.split()
        assert complete(upgraded.outputs())["usage"]["completion_tokens"] == 4
        upgraded("preview", "--expect-no-changes")


SMALL_ENGINE = "spark-llm-engine-spark-llm-standin-small"
# Both models' engines and the steps that stop them (the small model's group carries its name). Its step that stops
# the supervisor is not among them: it stopped the model's own supervisor, and now stops the stack's.
MODELS_UNTOUCHED = (
    *UNTOUCHED,
    "spark-spark-llm-standin-small-engine-head ",
    "spark-spark-llm-standin-small-engine-stop-head ",
)


def started(sim: SimCluster, node: str, container: str) -> tuple[str, str]:
    fmt = "{{.Id}} {{.State.StartedAt}}"
    ident, at = sim.node_exec(node, "docker", "inspect", "-f", fmt, container).stdout.split()
    return ident, at


def test_two_models_behind_the_router_deployed_before_the_stacks_room_upgrade_restarting_no_engine(
    sim_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory
):
    run([str(SIM), "up", "--load-router"], timeout=1200)
    before = checkout(MODELS_BEFORE, tmp_path_factory.mktemp("checkout-models-before"))
    now = project_copy(tmp_path_factory.mktemp("checkout-models-now"))
    try:
        with module_stack(tmp_path_factory, before) as deployed:
            deployed.reset_config()
            key = f"sk-upgrade-{secrets.token_hex(8)}"
            deployed("config", "set", "--secret", "apiKey", key)
            deployed.set("supervisor.enabled", "true")
            document = yaml.safe_load(deployed.config_file.read_text())
            two_models(document["config"])
            deployed.config_file.write_text(yaml.safe_dump(document, sort_keys=False))
            deployed.up()
            running = {**engines(sim_cluster), "small": started(sim_cluster, "head", SMALL_ENGINE)}
            weights = weights_on_nodes(sim_cluster)

            upgraded = dataclasses.replace(deployed, cwd=now)
            preview = upgraded("preview").stdout
            assert_untouched(preview, *MODELS_UNTOUCHED)
            out = upgraded.up().stdout
            assert_untouched(out, *MODELS_UNTOUCHED)
            assert {**engines(sim_cluster), "small": started(sim_cluster, "head", SMALL_ENGINE)} == running
            after = weights_on_nodes(sim_cluster)
            for node in NODES:
                assert set(after[node].splitlines()) ^ set(weights[node].splitlines()) == set(), node
            # One supervisor for the stack, watching both groups: the small model's own container is gone.
            supervisors = sim_cluster.node_exec("head", "docker", "ps", "-a", "--format", "{{.Names}} {{.Status}}")
            watchers = [line for line in supervisors.stdout.splitlines() if line.startswith("spark-llm-supervisor")]
            assert len(watchers) == 1 and watchers[0].startswith("spark-llm-supervisor Up"), watchers
            argv = sim_cluster.node_exec("head", "docker", "inspect", "-f", "{{json .Args}}", "spark-llm-supervisor")
            assert "/spark-llm-supervisor-spark-llm-standin-small/spec.json" in argv.stdout, argv.stdout
            client = openai.OpenAI(base_url=upgraded.outputs()["endpoint"] + "/v1", api_key=key, max_retries=0)
            for model in (BIG, SMALL):
                answer = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=4)
                assert answer.model == model and answer.choices[0].message.content
            upgraded("preview", "--expect-no-changes")
    finally:
        run([str(SIM), "up"], timeout=1200)  # the stack file without the router again, for the next module
