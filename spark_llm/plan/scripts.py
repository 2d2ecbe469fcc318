"""Where the node-side scripts are: the checkout's `scripts/` (Pulumi.yaml's directory), named once.

The plan reads them as text (the launch template, the manifest tool, the fan-out, the bash functions in
`scripts/lib/`) and puts them on the nodes; nothing else finds this directory on its own. They are the project's
own files, the same at every program run: reading them is the plan's only I/O.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = PROJECT_DIR / "scripts"
LAUNCH_TEMPLATE = SCRIPTS_DIR / "launch.tmpl.sh"
MANIFEST_TOOL = SCRIPTS_DIR / "manifest.py"
BASH_LIB_DIR = SCRIPTS_DIR / "lib"


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
