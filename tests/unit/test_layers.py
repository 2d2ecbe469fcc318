"""The layers are enforced: `make lint` runs import-linter with .importlinter, and an upward import breaks it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tree / ".importlinter")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the contracts, to break on purpose."""
    for package in ("spark_llm", "components"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.json", "__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path)
    return tmp_path


def add_import(module: Path, statement: str) -> None:
    text = module.read_text()
    marker = "from __future__ import annotations\n"
    assert marker in text
    module.write_text(text.replace(marker, marker + statement + "\n", 1))


def test_the_tree_as_it_is_keeps_every_contract(tree: Path):
    result = lint_imports(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "statement", "contract"),
    [
        # The plan reaching for the ssh runner: pure code doing node I/O.
        ("spark_llm/plan/deployment.py", "import spark_llm.remote.ssh", "config and plan are pure"),
        # The config declaring a Pulumi resource.
        ("spark_llm/config/nodes.py", "import pulumi_command", "config and plan are pure"),
        # A component calling the CLI.
        ("components/cluster.py", "import spark_llm.ops.status.command", "the CLI is above them"),
        # The remote layer declaring resources.
        ("spark_llm/remote/observe.py", "import components.connection", "remote talks to nodes"),
        # The group's room reaching for the plan: the supervisor on the head would not find it.
        ("spark_llm/group/verdict.py", "import spark_llm.plan.container", "the group's room stands alone"),
        # ... or for a package the head's Python does not have.
        ("spark_llm/group/times.py", "import pydantic", "the group's room stands alone"),
        # The config reaching up for the plan: a floor below importing a floor above.
        ("spark_llm/config/stack.py", "import spark_llm.plan.nodes", "the layers, top floor first"),
        # The remote layer reaching up for the CLI's renderer.
        ("spark_llm/remote/runner.py", "import spark_llm.ops.render", "the layers, top floor first"),
    ],
)
def test_an_upward_import_breaks_the_lint(tree: Path, module: str, statement: str, contract: str):
    add_import(tree / module, statement)
    result = lint_imports(tree)
    assert result.returncode != 0
    broken = result.stdout[result.stdout.index("Broken contracts") :]
    assert contract in broken, result.stdout


def test_a_cycle_between_sibling_modules_breaks_the_lint(tree: Path):
    # drift already imports observation; the reverse closes a loop.
    add_import(tree / "spark_llm/plan/observation.py", "import spark_llm.plan.drift")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "No cycles are allowed" in result.stdout


def test_entry_points_live_in_ops_and_the_floors_below_are_libraries():
    # What a resource runs (`python -m ...`) or a person starts is the top floor's; below it, nothing is a program.
    for floor in ("group", "config", "plan", "remote"):
        for module in sorted((ROOT / "spark_llm" / floor).rglob("*.py")):
            text = module.read_text()
            # (config.schema_docs is the developers' `make docs` and `make lint`, not something the product runs.)
            assert '__name__ == "__main__"' not in text or module.name == "schema_docs.py", module
    for module in sorted((ROOT / "components").glob("*.py")):
        assert "-m spark_llm.remote" not in module.read_text() and "-m spark_llm.plan" not in module.read_text()
