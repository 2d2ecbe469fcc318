"""`make demo` on a machine with the tools: the sim cluster, `pulumi up --stack sim`, a completion printed.

User story: a newcomer runs one command and sees the stand-in engine answer across head and worker; the stack
holds the real providers' resources (`pulumi stack export`).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.conftest import REPO, SIM, file_backend_url, project_stack_file_lock, run

pytestmark = pytest.mark.integration


def test_demo_prints_a_completion_served_across_head_and_worker(standin_image, tmp_path):
    # `make demo` as a newcomer runs it: the work tree's own sim (not a test worker's), created if need be.
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LLM_SIM_HOME"}
    env |= {"PULUMI_BACKEND_URL": file_backend_url(tmp_path), "WORKERS": "1"}
    state = REPO / ".sim" / "state.json"
    with project_stack_file_lock():
        created = not state.exists()
        try:
            out = run([str(REPO / "tools" / "demo.sh")], env=env, timeout=1800).stdout
            completion = json.loads(out.split("==> one completion from", 1)[1].splitlines()[1])
            assert completion["object"] == "text_completion"
            assert completion["system_fingerprint"] == "spark-llm-standin"
            assert completion["choices"][0]["text"].strip()
            # Served across both nodes: the head's engine reports the worker joined its group.
            head = f"{json.loads(state.read_text())['prefix']}-head"
            head_log = run(["docker", "exec", head, "docker", "logs", "spark-llm-engine"]).stdout
            assert "node rank 1 joined" in head_log
            # The real providers' resources, and no hand-written dynamic ones.
            export = json.loads(run(["pulumi", "stack", "export", "--stack", "sim"], env=env).stdout)
            types = [r["type"] for r in export["deployment"]["resources"]]
            # One engine per node, and the stack's supervisor on the head (on by default).
            containers = [
                r for r in export["deployment"]["resources"] if r["type"] == "docker:index/container:Container"
            ]
            names = sorted(r["inputs"]["name"] for r in containers)
            assert names == ["spark-llm-engine", "spark-llm-engine", "spark-llm-supervisor"], names
            assert "command:remote:Command" in types and "docker:index/remoteImage:RemoteImage" in types
            assert not any(t.startswith("pulumi-python:dynamic") for t in types), sorted(set(types))
        finally:
            run(["pulumi", "destroy", "--stack", "sim", "--yes", "--non-interactive"], env=env, check=False)
            if created:  # a test worker's run: leave the work tree as it was
                run([str(SIM), "down"], env=env, check=False, timeout=300)
