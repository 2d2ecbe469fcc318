"""`make demo` on a machine with the tools: the sim cluster, `pulumi up --stack sim`, a completion printed.

User story: a newcomer runs one command and sees the stand-in engine answer across head and worker; the stack
holds the real providers' resources (`pulumi stack export`).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.conftest import REPO, run

pytestmark = pytest.mark.integration


def test_demo_prints_a_completion_served_across_head_and_worker(sim_cluster, tmp_path):
    env = dict(os.environ, PULUMI_BACKEND_URL=f"file://{tmp_path}", WORKERS="1")
    try:
        out = run([str(REPO / "tools" / "demo.sh")], env=env, timeout=1800).stdout
        completion = json.loads(out.split("==> one completion from", 1)[1].splitlines()[1])
        assert completion["object"] == "text_completion"
        assert completion["system_fingerprint"] == "spark-llm-standin"
        assert completion["choices"][0]["text"].strip()
        # Served across both nodes: the head's engine reports the worker joined its group.
        head_log = run(["docker", "exec", sim_cluster.container("head"), "docker", "logs", "spark-llm-engine"]).stdout
        assert "node rank 1 joined" in head_log
        # The real providers' resources, and no hand-written dynamic ones.
        export = json.loads(run(["pulumi", "stack", "export", "--stack", "sim"], env=env).stdout)
        types = [r["type"] for r in export["deployment"]["resources"]]
        assert types.count("docker:index/container:Container") == 2  # one per node
        assert "command:remote:Command" in types and "docker:index/remoteImage:RemoteImage" in types
        assert not any(t.startswith("pulumi-python:dynamic") for t in types), sorted(set(types))
    finally:
        run(["pulumi", "destroy", "--stack", "sim", "--yes", "--non-interactive"], env=env, check=False)
