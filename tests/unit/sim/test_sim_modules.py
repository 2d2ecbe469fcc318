"""sim/'s Python modules (flat: sim/sim puts sim/ first on sys.path and they import each other by name) import each
other in one direction only, and each stays a small file (issue 15)."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

SIM = Path(__file__).resolve().parents[3] / "sim"
MAX_LINES = 400


def sim_sources() -> dict[str, Path]:
    """Module name -> file: sim/*.py and the CLI script sim/sim."""
    sources = {path.stem: path for path in SIM.glob("*.py")}
    sources["sim"] = SIM / "sim"
    return sources


def sim_imports(path: Path, modules: set[str]) -> set[str]:
    """The sim modules a file imports (at any level, type-checking blocks too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & (modules - {path.stem})


def test_sim_modules_import_each_other_without_a_cycle():
    sources = sim_sources()
    graph = {name: sim_imports(path, set(sources)) for name, path in sources.items()}
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        raise AssertionError(f"sim modules import each other in a cycle: {exc.args[1]}") from None
    assert not [name for name, imported in graph.items() if "sim" in imported], "the CLI sim/sim is the top layer"
    assert graph["host"] == set(), "host.py is the bottom layer: it imports no other sim module"


def test_every_sim_module_is_under_the_house_limit():
    long = {name: n for name, path in sim_sources().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines, split by what the parts are for: {long}"


def test_each_node_has_a_fixed_address_on_the_sim_networks(monkeypatch):
    monkeypatch.syspath_prepend(str(SIM))
    from networks import node_address  # sim/'s flat modules, as sim/sim imports them

    assert node_address("172.29.3.0/24", "head") == "172.29.3.10"
    assert node_address("172.29.3.0/24", "worker-1") == "172.29.3.11"
    assert node_address("172.29.3.0/24", "worker-12") == "172.29.3.22"
