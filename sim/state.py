"""What `sim up` recorded of a cluster in .sim/state.json (read by `status`, `down` and `link`), and its nodes."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Node:
    """One sim node as the stack file and `status` see it."""

    name: str
    role: str
    container: str
    fabric_address: str
    host_key: str
    mgmt_address: str | None = None

    @property
    def ssh_host(self) -> str:
        """The address the operator's ssh connects to (through the head for a worker)."""
        return self.mgmt_address if self.role == "head" else self.fabric_address


@dataclass
class ClusterState:
    """What `up` recorded in .sim/state.json, read by `status` and `down`."""

    prefix: str
    image: str = ""
    mgmt_subnet: str = ""
    fabric_subnet: str = ""
    nodes: list[Node] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> ClusterState | None:
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        nodes = [Node(**node) for node in raw.pop("nodes", [])]
        return cls(nodes=nodes, **raw)

    def save(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @property
    def workers(self) -> list[Node]:
        return [node for node in self.nodes if node.role == "worker"]
