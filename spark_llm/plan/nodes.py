"""Pure: one node of the plan (rank, ssh, fabric address, where its files live), apart from the plan that lists them.

Its own module so that the step planners (weights, node files, drift) can take a node without importing
spark_llm.plan.deployment, which builds their steps into the plan (deployment imports them, not the reverse).
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_llm.plan.hosts import SshHost

RAY_TOKEN_NAME = "ray-token"


@dataclass(frozen=True)
class NodePlan:
    """What one node runs: its rank, how ssh reaches it, and where its files live."""

    name: str
    role: str
    rank: int
    ssh: SshHost
    fabric_address: str
    remote_dir: str
    config_key: str = ""
    """The node as the stack config names it (`spark-llm:nodes[i]`), for messages that say what to change."""

    @property
    def script_path(self) -> str:
        return f"{self.remote_dir}/launch.sh"

    @property
    def env_path(self) -> str:
        return f"{self.remote_dir}/engine.env"

    @property
    def ray_token_path(self) -> str:
        """The group's Ray token on this node (0600): only with the Ray executor (DeploymentPlan.ray_auth)."""
        return f"{self.remote_dir}/{RAY_TOKEN_NAME}"


def remote_dir(user: str, unit: str | None = None) -> str:
    """Where the launch script and env file live on a node: the login user's home. `unit`: a model of several
    (spark_llm.config.models.Deployment.key), whose files, records and history are its own, apart from the others'."""
    home = "/root/spark-llm" if user == "root" else f"/home/{user}/spark-llm"
    return home if unit is None else f"{home}/models/{unit}"


# The directory under monitoring_dir where the head's agent writes its metrics for the head's exporter.
TEXTFILE_SUBDIR = "textfile"


def monitoring_dir(user: str) -> str:
    """spark-llm:monitoring's files on the head (spark_llm.plan.monitoring.prometheus): the stack's, not a model's."""
    return f"{remote_dir(user)}/monitoring"
