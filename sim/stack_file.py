"""The stack file `sim up` writes (Pulumi.sim.yaml): the nodes as the program's config reads them, the keys of
sim/stack-defaults.yaml, and whatever Pulumi itself keeps in the file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml
from host import SimError
from paths import SimPaths
from state import Node

STACK_HEADER = (
    "# Written by `sim up` (sim/sim) for the simulated cluster: every `sim up` rewrites spark-llm:nodes and\n"
    "# spark-llm:sshKeyPath and keeps your other keys; `sim down` removes the file. Shared defaults come from\n"
    "# sim/stack-defaults.yaml.\n"
)
# The keys `sim up` owns: what the cluster it made is. Every other key is the user's (issue 31, 12: `WORKERS=3 make
# demo` used to drop them, and the next `up` deleted the supervisor a user had enabled). spark-llm:router names the
# image `sim up --load-router` loaded on the head: written by that `up`, dropped by an `up` without the flag.
SIM_KEYS = ("spark-llm:sshKeyPath", "spark-llm:nodes", "spark-llm:router", "spark-llm:monitoring")


class _Quoted(str):
    """A string the stack file writes in double quotes (host keys, as in the documented shape)."""


class _StackDumper(yaml.SafeDumper):
    pass


_StackDumper.add_representer(
    _Quoted, lambda dumper, data: dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style='"')
)


def load_stack_defaults(path: Path) -> dict:
    """Keys of sim/stack-defaults.yaml: a mapping of config keys (or one `config:` mapping of them)."""
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    if isinstance(data, dict) and set(data) == {"config"}:
        data = data["config"] or {}
    if not isinstance(data, dict):
        raise SimError(f"{path}: expected a mapping of config keys, e.g. 'spark-llm:engine: vllm'")
    return data


def node_config(node: Node) -> dict:
    entry: dict = {
        "name": node.name,
        "role": node.role,
        "host": node.ssh_host,
        "port": 22,
        "user": "root",
        "fabricAddress": node.fabric_address,
    }
    if node.role == "worker":
        entry["via"] = "head"
    entry["hostKey"] = _Quoted(node.host_key)
    return entry


def stack_text(
    paths: SimPaths, nodes: Sequence[Node], router_image: str | None = None, monitoring_image: str | None = None
) -> str:
    document: dict = {}
    user: dict = {}
    # Keep what Pulumi itself stores in the stack file (encryptionsalt, secretsprovider, ...) and the user's keys.
    if paths.stack_file.exists():
        existing = yaml.safe_load(paths.stack_file.read_text()) or {}
        if isinstance(existing, dict):
            document.update((key, value) for key, value in existing.items() if key != "config")
            if isinstance(existing.get("config"), dict):
                user = {key: value for key, value in existing["config"].items() if key not in SIM_KEYS}
    config = {
        "spark-llm:sshKeyPath": str(paths.operator_key),
        "spark-llm:nodes": [node_config(node) for node in nodes],
        **({"spark-llm:router": {"image": router_image}} if router_image else {}),
        # One image for every role on the sim (sim/monitoring/build-image.sh); Alertmanager's too, which a stack
        # turns on with a webhook (monitoring.alertmanagerImage: the same ID).
        **(
            {"spark-llm:monitoring": {"image": monitoring_image, "nodeExporterImage": monitoring_image}}
            if monitoring_image
            else {}
        ),
        **user,
    }
    for key, value in load_stack_defaults(paths.stack_defaults).items():
        config.setdefault(key, value)
    document["config"] = config
    return STACK_HEADER + yaml.dump(document, Dumper=_StackDumper, sort_keys=False, default_flow_style=False)


def write_stack_file(
    paths: SimPaths, nodes: Sequence[Node], router_image: str | None = None, monitoring_image: str | None = None
) -> None:
    tmp = paths.stack_file.with_suffix(".yaml.tmp")
    tmp.write_text(stack_text(paths, nodes, router_image, monitoring_image))
    tmp.replace(paths.stack_file)
