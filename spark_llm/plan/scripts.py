"""Where the node-side scripts are: the checkout's `scripts/` (Pulumi.yaml's directory), named once.

The plan reads them as text (the launch template, the manifest tool, the fan-out, the bash functions in
`scripts/lib/`) and puts them on the nodes; nothing else finds this directory on its own. They are the project's
own files, the same at every program run: reading them is the plan's only I/O.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = PROJECT_DIR / "scripts"
LAUNCH_TEMPLATE = SCRIPTS_DIR / "launch.tmpl.sh"
MANIFEST_TOOL = SCRIPTS_DIR / "manifest.py"
MANIFEST_SCAN = SCRIPTS_DIR / "manifest_scan.py"
BASH_LIB_DIR = SCRIPTS_DIR / "lib"
# The program's import of its first half, which the one stream the nodes get leaves out (its names are there).
_MANIFEST_IMPORT = re.compile(r"^from manifest_scan import \([^)]*\)\n", re.MULTILINE)


@cache
def manifest_tool() -> str:
    """The manifest program as a step ships it: `python3 - scan DIR` reads one file, so its two files (the
    manifest's files, then the commands) are joined into one, the second without its import of the first."""
    program, found = _MANIFEST_IMPORT.subn("", MANIFEST_TOOL.read_text())
    if found != 1:
        raise ValueError(f"{MANIFEST_TOOL}: expected one `from manifest_scan import (...)`")
    return MANIFEST_SCAN.read_text() + "\n\n" + program


@cache
def bash_lib(name: str) -> str:
    """The functions of `scripts/lib/NAME.sh` as a step's script carries them: the file without its header.

    The header (a shellcheck directive and comments, up to the first empty line) is for whoever reads the file;
    the step's script, which is a Pulumi input, carries only the definitions, so editing the header re-runs
    nothing on the nodes.
    """
    path = BASH_LIB_DIR / f"{name}.sh"
    header, blank, body = path.read_text().partition("\n\n")
    if not blank or not all(line.startswith("#") for line in header.splitlines()):
        raise ValueError(f"{path}: expected a comment header, an empty line, then the functions")
    return body
