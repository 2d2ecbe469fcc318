"""The weights tests' tools: a plan of the dual-spark stack with a given model source, the rendered scripts run
for real under bash (the strict mode of every remote script), the manifest tool, a model directory, the head-side
copy's script. What needs a node (the fabric, the upload over ssh) is covered by tests/integration/test_weights.py.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from spark_llm import config
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan.scripts import MANIFEST_TOOL
from spark_llm.plan.weights import steps as weights
from tests.conftest import dual_spark_raw

TOOL = weights.manifest_tool()
TEMPLATE = plan.LAUNCH_TEMPLATE.read_text()
REVISION = "0123456789abcdef0123456789abcdef01234567"
HF = {"kind": "huggingface", "repo": "Qwen/Qwen3.5-122B-A10B-FP8", "revision": REVISION}
TOKEN = "tok-1"


def build(source: dict | None = None, *, path: str | None = None, purge: bool = False):
    raw = dual_spark_raw()
    if source is not None:
        raw["model"]["source"] = source
    if path is not None:
        raw["model"]["path"] = path
    raw["model"]["purgeOnDestroy"] = purge
    cfg = groups(config.parse(raw))[0]
    return cfg, plan.build_plan(cfg, TEMPLATE)


def run_bash(script: str, env: dict, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    # The same strict mode spark_llm.remote.ssh puts ahead of every script.
    result = subprocess.run(
        ["bash", "-s"], input="set -euo pipefail\n" + script, capture_output=True, text=True, env=env, timeout=120
    )
    if check and result.returncode != 0:
        raise AssertionError(f"exit {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def tool(*args: str, env: dict) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(MANIFEST_TOOL), *args], capture_output=True, text=True, env=env, check=True
    )


def model_dir(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def head_copy(tmp_path: Path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    cfg, p = build({"kind": "head", "path": str(src)}, path=str(dst))
    head = dataclasses.replace(p.head, remote_dir=str(tmp_path / "remote"))
    return weights.render_obtain(cfg, head, TOOL, TOKEN)
