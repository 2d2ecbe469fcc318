"""`. tools/env.sh` picks the state backend: this checkout's own, unless the user chose one (issue 31, 10: sourced
from a second checkout in the same shell, it kept the first checkout's backend, so the second read the wrong state)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def checkout(root: Path, name: str) -> Path:
    tools = root / name / "tools"
    tools.mkdir(parents=True)
    for file in ("env.sh", "versions.env"):
        shutil.copy(REPO / "tools" / file, tools / file)
    return root / name


def backend_after(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'set -eu; {script}; printf %s "$PULUMI_BACKEND_URL"'],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )


def clean_env(tmp_path: Path) -> dict[str, str]:
    drop = ("PULUMI_BACKEND_URL", "SPARK_LLM_BACKEND_SET")
    return {k: v for k, v in os.environ.items() if k not in drop} | {"SPARK_LLM_CACHE": str(tmp_path / "cache")}


def test_a_second_checkout_sourced_in_the_same_shell_uses_its_own_state(tmp_path: Path):
    first, second = checkout(tmp_path, "first"), checkout(tmp_path, "second")
    result = backend_after(f". {first}/tools/env.sh; . {second}/tools/env.sh", clean_env(tmp_path))
    assert result.stdout == f"file://{second}/.pulumi-state?metadata=skip"
    assert f"the state is now this checkout's (file://{second}/" in result.stderr
    assert f"no longer file://{first}/.pulumi-state" in result.stderr
    # Sourced again in the same checkout: nothing to say.
    again = backend_after(f". {second}/tools/env.sh; . {second}/tools/env.sh", clean_env(tmp_path))
    assert again.stdout == f"file://{second}/.pulumi-state?metadata=skip" and again.stderr == ""


def test_a_backend_the_user_chose_is_kept(tmp_path: Path):
    first = checkout(tmp_path, "first")
    chosen = "postgres://pulumi@db.example.internal:5432/spark_llm"
    result = backend_after(f". {first}/tools/env.sh", clean_env(tmp_path) | {"PULUMI_BACKEND_URL": chosen})
    assert result.stdout == chosen and result.stderr == ""
