"""Where one sim keeps its state (.sim/) and writes its stack file (Pulumi.sim.yaml), for one repository."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

SIM_DIR = Path(__file__).resolve().parent
REPO_DIR = SIM_DIR.parent


# Where a sim keeps its state (.sim/) and writes its stack file (Pulumi.sim.yaml): the work tree, unless this
# variable names another directory. The test bed runs one sim per pytest-xdist worker, each in a home of its own.
SIM_HOME_ENV = "SPARK_LLM_SIM_HOME"


@dataclass(frozen=True)
class SimPaths:
    """Where the sim keeps its state and writes its outputs for one repository (in `home`: the work tree unless
    $SPARK_LLM_SIM_HOME says otherwise)."""

    repo: Path
    home: Path

    @property
    def state_dir(self) -> Path:
        return self.home / ".sim"

    @property
    def operator_key(self) -> Path:
        return self.state_dir / "id_ed25519"

    @property
    def fabric_key(self) -> Path:
        return self.state_dir / "fabric_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.state_dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.state_dir / "ssh_config"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def stack_file(self) -> Path:
        return self.home / "Pulumi.sim.yaml"

    @property
    def stack_defaults(self) -> Path:
        return self.repo / "sim" / "stack-defaults.yaml"


def repo_paths() -> SimPaths:
    home = os.environ.get(SIM_HOME_ENV)
    return SimPaths(repo=REPO_DIR, home=Path(home).resolve() if home else REPO_DIR)
