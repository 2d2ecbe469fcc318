"""The program's one look at the nodes (spark_llm.remote.observe.observe_stack): one probe session a node for every
model's group, whatever the number of models; each group reads its own engine container, tokens and facts.

User story: an operator with two models on two nodes runs `pulumi preview`; each node is asked once (issue 40: with
M models on N nodes the program opened M x N sessions), and each model's drift is judged from its own containers.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter

from spark_llm.plan.observation import GROUP_MARK, grouped_script, split_probe, stack_probe
from spark_llm.remote import observe
from tests.unit.ops.several_models import BIG, SMALL, two_models


def engine_line(container: str) -> str:
    """What `engine_state` prints for a running container named `container` (the probe's own function)."""
    return "engine\t" + json.dumps({"status": "running", "exit_code": 0, "container_id": f"id-{container}"})


def test_two_models_on_two_nodes_are_read_in_one_probe_session_a_node(raw_config, monkeypatch):
    stack = two_models(raw_config)
    sessions: Counter[str] = Counter()
    scripts: dict[str, str] = {}

    def run_script(target, script, *, timeout=None, tail_lines=40):
        sessions[target.name] += 1
        scripts[target.name] = script
        # Each group's part prints its own container's state after its mark (the head runs both groups).
        parts = {0: "spark-llm-engine", 1: "spark-llm-engine-embed"}
        on_node = [i for i in parts if f"{GROUP_MARK}\\t%s\\n' {i}" in script]
        return "".join(f"{GROUP_MARK}\t{i}\n{engine_line(parts[i])}\n" for i in on_node)

    monkeypatch.setattr(observe, "run_script", run_script)
    monkeypatch.setattr(observe, "run_node", lambda *args, **kwargs: None)  # the head's master connection
    seen = observe.observe_stack([(plan, lambda node: "") for plan in stack.groups])
    assert sessions == {"spark-1": 1, "spark-2": 1}
    big, small = seen
    assert sorted(big) == ["spark-1", "spark-2"] and sorted(small) == ["spark-1"]  # embed runs on the head alone
    assert big["spark-1"].engine.container_id == "id-spark-llm-engine"
    assert small["spark-1"].engine.container_id == "id-spark-llm-engine-embed"
    assert big["spark-2"].engine.container_id == "id-spark-llm-engine"
    assert "spark-llm-engine-embed" not in scripts["spark-2"]
    assert {stack.groups[0].model_name, stack.groups[1].model_name} == {BIG, SMALL}


def test_one_groups_probe_ends_its_own_part_only_when_docker_does_not_answer(raw_config, tmp_path):
    """The probe ends with `exit` when Docker does not answer: in its own subshell it ends that group's part alone,
    and every group says so (a node's Docker is every group's)."""
    stack = two_models(raw_config)
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    fake.chmod(0o755)
    script = stack_probe([(plan, "echo 'extra\tread'\n") for plan in stack.groups], stack.first.head)
    out = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        capture_output=True,
        text=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        check=True,
    ).stdout
    parts = split_probe(out)
    assert sorted(parts) == [0, 1]
    for part in parts.values():
        assert part.startswith("docker\tCannot connect to the Docker daemon")


def test_a_part_whose_output_ends_without_a_newline_does_not_hide_the_next_parts_mark():
    """curl's `-w ' HTTP%{http_code}'` ends the canary's output without a newline: `spark-llm status` asks every
    model's canary in one session on the head, and each answer must stay its own (a sim run read the second model's
    as `could not ask`)."""
    script = grouped_script([(0, "printf '{\"a\": 1} HTTP200'"), (1, "printf '{\"b\": 2} HTTP503'")])
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    parts = split_probe(out)
    assert {i: part.rstrip() for i, part in parts.items()} == {0: '{"a": 1} HTTP200', 1: '{"b": 2} HTTP503'}
