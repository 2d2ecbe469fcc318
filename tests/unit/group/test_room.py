"""The group's room ships to the head beside the supervisor, whose Python has only its standard library."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import spark_llm.group

ROOM = Path(spark_llm.group.__file__).parent


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_room_imports_the_standard_library_and_itself_only():
    for path in sorted(ROOM.glob("*.py")):
        outside = {
            name
            for name in imported(path)
            if name.split(".")[0] not in sys.stdlib_module_names and not name.startswith("spark_llm.group")
        }
        assert not outside, f"{path.name} imports {sorted(outside)}"
