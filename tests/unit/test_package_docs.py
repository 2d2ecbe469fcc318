"""Every package's docstring names what is inside it: each module and each package below it, by name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(
    p.parent.relative_to(ROOT).as_posix()
    for top in ("spark_llm", "components")
    for p in (ROOT / top).rglob("__init__.py")
)
# Packages whose docstring is being rewritten elsewhere (the lead's restructuring): what they do not name yet. An
# entry that is named since fails here too, so the list only shrinks.
NOT_NAMED_YET: dict[str, set[str]] = {}


def inside(package: Path) -> set[str]:
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    packages = {p.parent.name for p in package.glob("*/__init__.py")}
    return modules | packages


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_docstring_names_every_module_and_package_inside(package):
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text())) or ""
    unnamed = {name for name in inside(ROOT / package) if not re.search(rf"(?<![\w.]){re.escape(name)}\b", doc)}
    assert unnamed == NOT_NAMED_YET.get(package, set()), f"{package}/__init__.py does not name {sorted(unnamed)}"
