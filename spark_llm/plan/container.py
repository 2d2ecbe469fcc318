"""Pure: each node's engine container as data (command, environment, mounts, devices, labels), from the plan.

components/engine_group.py turns a spec into a `docker.Container` on that node's docker provider; the reasons
for each docker option are written there, beside the option.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from spark_llm.plan.deployment import (
    CONTAINER_ENV_FILE,
    CONTAINER_RAY_TOKEN,
    CONTAINER_SCRIPT,
    DeploymentPlan,
    NodePlan,
)
from spark_llm.plan.scripts import bash_lib

# Labels every engine container carries; spark_llm.remote.observe reads them back.
LABEL_NODE = "spark-llm.node"
LABEL_ROLE = "spark-llm.role"
LABEL_REVISION = "spark-llm.group-revision"
LABEL_GENERATION = "spark-llm.generation"


@dataclass(frozen=True)
class Mount:
    source: str
    """Path on the node."""
    target: str
    """Path in the container."""
    read_only: bool = True


@dataclass(frozen=True)
class ContainerSpec:
    node: str
    role: str
    name: str
    entrypoint: tuple[str, ...]
    command: tuple[str, ...]
    env: dict[str, str]
    mounts: tuple[Mount, ...]
    gpus: bool
    rdma: bool
    memlock_bytes: int
    labels: dict[str, str]


def cache_dir(node: NodePlan) -> str:
    """The node's compile/JIT cache, mounted as the container's ~/.cache (kept across restarts)."""
    return f"{node.remote_dir}/cache"


def container_spec(plan: DeploymentPlan, node: NodePlan) -> ContainerSpec:
    launch = plan.launches[node.name]
    mounts = [
        Mount(node.script_path, CONTAINER_SCRIPT),
        Mount(node.env_path, CONTAINER_ENV_FILE),
        Mount(plan.model_path, plan.model_path),
        Mount(cache_dir(node), "/root/.cache", read_only=False),
    ]
    if plan.api_config_path and node.role == "head":
        # Only the API-serving rank reads the key file (`--config`), so only the head mounts it.
        mounts.append(Mount(plan.api_config_path, plan.api_config_path))
    if plan.ray_auth:
        # Every Ray node reads the group's token (RAY_AUTH_TOKEN_PATH): the head's GCS checks it, the others send it.
        mounts.append(Mount(node.ray_token_path, CONTAINER_RAY_TOKEN))
    env = {
        **launch.env,
        "SPARK_LLM_NODE": node.name,
        "SPARK_LLM_ENGINE_VERSION": plan.engine_version,
        # docker's init (tini) signals the engine's whole process group on `docker stop`, not only its child.
        "TINI_KILL_PROCESS_GROUP": "1",
    }
    return ContainerSpec(
        node=node.name,
        role=node.role,
        name=plan.container,
        entrypoint=("/bin/bash", CONTAINER_SCRIPT, "run", node.name),
        command=launch.argv,
        env=dict(sorted(env.items())),
        mounts=tuple(mounts),
        gpus=plan.gpus,
        rdma=plan.rdma,
        memlock_bytes=plan.memlock_bytes,
        labels={LABEL_NODE: node.name, LABEL_ROLE: node.role, LABEL_REVISION: plan.group_revision},
    )


def stop_script(plan: DeploymentPlan, node: NodePlan) -> str:
    """The step that stops a node's engine before any member of the group is replaced (components.engine_group).

    Stopped, then removed: a container this state does not know (its state lost, or a stack re-created on another
    backend) would otherwise hold the name and fail the create. The docker provider's delete of the container it
    knew tolerates it being gone.
    """
    return (
        f"docker stop -t 10 {shlex.quote(plan.container)} >/dev/null 2>&1 || true\n"
        f"docker rm -f {shlex.quote(plan.container)} >/dev/null 2>&1 || true\n"
        f"echo 'stopped the engine on {node.name} (if it ran): the group restarts in order'\n"
    )


def take_ports_script(plan: DeploymentPlan, node: NodePlan) -> str:
    """The group's first step on a node (components.engine_group): another spark-llm engine holding this group's API
    or distributed port there (a model renamed or removed in the same `up`) is removed before this group is admitted
    and started (scripts/lib/engine_ports.sh says why)."""
    ports = [str(port) for port in (plan.port, plan.dist_port) if port]
    words = [node.name, plan.container, *ports]
    return bash_lib("engine_ports") + "take_ports " + " ".join(shlex.quote(word) for word in words) + "\n"
