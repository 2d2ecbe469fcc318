"""Fixtures for tests against the simulated cluster with the real pulumi CLI.

The cluster is shared by the whole session (bringing one up costs ~10 s once the images are cached) and taken
down at the end if this session created it. Each deploy test module gets its own Pulumi state backend in a
temp dir, so tests never touch the developer's .pulumi-state.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "sim" / "sim"
SIM_STATE = REPO / ".sim" / "state.json"
STACK_FILE = REPO / "Pulumi.sim.yaml"
SIM_IMAGE_TAG = "spark-llm/standin-engine:sim"


def run(cmd: list[str], *, timeout: float = 600, check: bool = True, env: dict | None = None, cwd: Path = REPO):
    result = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env, cwd=cwd
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{cmd} exited {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


@pytest.fixture(scope="session")
def standin_image() -> Path:
    """The stand-in engine image tarball (built once, cached by recipe)."""
    out = run([str(REPO / "sim" / "engine" / "build-image.sh")], timeout=1200).stdout.strip().splitlines()
    return Path(out[-1])


@dataclass
class SimCluster:
    prefix: str

    def nodes(self) -> list[dict]:
        return yaml.safe_load(STACK_FILE.read_text())["config"]["spark-llm:nodes"]

    def container(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def node_exec(self, node: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A command inside a sim node (test plumbing, not the product's path)."""
        return run(["docker", "exec", self.container(node), *cmd], check=check, timeout=120)

    def resize(self, workers: int, image: Path) -> None:
        run(
            [
                str(SIM),
                "up",
                "--workers",
                str(workers),
                "--load-image",
                str(image),
                "--load-on",
                "all",
                "--image-tag",
                SIM_IMAGE_TAG,
            ],
            timeout=1200,
        )


@pytest.fixture(scope="session")
def sim_cluster(standin_image: Path) -> Iterator[SimCluster]:
    created = not SIM_STATE.exists()
    cluster = SimCluster(prefix="")
    cluster.resize(1, standin_image)
    cluster.prefix = json.loads(SIM_STATE.read_text())["prefix"]
    yield cluster
    if created:
        run([str(SIM), "down"], timeout=300)


@dataclass
class Pulumi:
    """The real pulumi CLI on the sim stack, with a private state backend."""

    env: dict[str, str]
    stack: str = "sim"

    def __call__(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return run(
            ["pulumi", *args, "--stack", self.stack, "--non-interactive"], env=self.env, check=check, timeout=timeout
        )

    def up(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self("up", "--yes", "--skip-preview", *args, check=check)

    def outputs(self) -> dict:
        return json.loads(self("stack", "output", "--json", "--show-secrets").stdout)


@pytest.fixture(scope="module")
def pulumi(sim_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pulumi]:
    backend = tmp_path_factory.mktemp("pulumi-state")
    env = dict(os.environ, PULUMI_BACKEND_URL=f"file://{backend}")
    cli = Pulumi(env=env)
    run(["pulumi", "stack", "init", "sim", "--non-interactive"], env=env)
    yield cli
    # Leave no engine running for the next module: destroy what this module deployed.
    cli("destroy", "--yes", "--skip-preview", check=False)
    # --preserve-config: Pulumi.sim.yaml belongs to `sim up` (the nodes), and the next module needs it.
    run(
        ["pulumi", "stack", "rm", "sim", "--yes", "--force", "--preserve-config", "--non-interactive"],
        env=env,
        check=False,
    )
