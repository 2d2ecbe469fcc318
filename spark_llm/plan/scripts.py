"""Where the node-side scripts are: the checkout's `scripts/` (Pulumi.yaml's directory), named once.

The plan reads them as text (the launch template, the manifest tool, the fan-out) and puts them on the nodes;
nothing else finds this directory on its own.
"""

from __future__ import annotations

from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parents[2]
SCRIPTS_DIR = PROJECT_DIR / "scripts"
LAUNCH_TEMPLATE = SCRIPTS_DIR / "launch.tmpl.sh"
MANIFEST_TOOL = SCRIPTS_DIR / "manifest.py"
