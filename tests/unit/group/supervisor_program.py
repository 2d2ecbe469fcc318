"""scripts/supervisor.py loaded as its container runs it: its own dir (supervisor_node.py beside it) first on the
import path, the group's room importable as the package it ships with."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from spark_llm.plan.supervisor import PROGRAM


def load(name: str) -> ModuleType:
    if str(PROGRAM.parent) not in sys.path:
        sys.path.insert(0, str(PROGRAM.parent))
    spec = importlib.util.spec_from_file_location(name, PROGRAM)
    assert spec is not None and spec.loader is not None
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    return program
