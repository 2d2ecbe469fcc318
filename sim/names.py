"""A cluster's name prefix and the docker object names and labels made from it; which work tree owns them."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from host import SimError


def default_prefix(home: Path) -> str:
    """One cluster per sim home by default: a clone (CI's, say) never collides with a cluster another checkout, or
    another test worker, left behind. Node host names (head, worker-N) do not depend on it."""
    return "spark-llm-" + hashlib.sha256(str(home).encode()).hexdigest()[:6]


PREFIX_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,30}$")

LABEL_CLUSTER = "spark-llm.sim.cluster"
LABEL_NODE = "spark-llm.sim.node"
# The repository whose .sim/ owns a cluster: another work tree on this machine must not adopt it.
LABEL_REPO = "spark-llm.sim.repo"


def check_prefix(prefix: str) -> None:
    if not PREFIX_PATTERN.match(prefix):
        raise SimError(f"--name {prefix!r}: use lowercase letters, digits and '-', e.g. 'spark-llm'")


@dataclass(frozen=True)
class ClusterNames:
    """Docker object names and labels of one cluster: names from its prefix, owner is its repository."""

    prefix: str
    owner: str

    def labels(self, node: str | None = None) -> list[str]:
        labels = ["--label", f"{LABEL_CLUSTER}={self.prefix}", "--label", f"{LABEL_REPO}={self.owner}"]
        return labels + (["--label", f"{LABEL_NODE}={node}"] if node else [])

    def filters(self) -> list[str]:
        return ["--filter", f"label={LABEL_CLUSTER}={self.prefix}", "--filter", f"label={LABEL_REPO}={self.owner}"]

    def check_owned(self, what: str, labels: dict[str, str] | None) -> None:
        """Refuse to touch a same-named object that another work tree's sim (or anything else) made."""
        owner = (labels or {}).get(LABEL_REPO)
        if owner != self.owner:
            made_by = f"the sim of {owner}" if owner else "something other than sim/sim"
            raise SimError(f"{what} exists but was made by {made_by}; use `sim up --name OTHER-PREFIX`")

    @property
    def mgmt_network(self) -> str:
        return f"{self.prefix}-mgmt"

    @property
    def fabric_network(self) -> str:
        return f"{self.prefix}-fabric"

    def container(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def volume(self, node: str) -> str:
        return f"{self.prefix}-{node}-docker"
