"""One model's engine group as the plan reads it: the stack's own sections beside that model's deployment.

A stack parses once (spark_llm.config.stack.parse) to its own sections (nodes, network, transfer, timeouts,
rollout, supervisor, memory, router, keys) and a list of model deployments (spark_llm.config.models.Deployment):
the single form is a list of one. `GroupConfig` puts one deployment beside the stack it belongs to, for the plan
of that model's group: a view over the parsed stack, never a copy of it, with the model, image and engine always
set (they are the deployment's).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from spark_llm.config.engine import Engine
from spark_llm.config.image import Image
from spark_llm.config.memory import Memory
from spark_llm.config.model import Model
from spark_llm.config.models import Deployment
from spark_llm.config.monitoring import Monitoring
from spark_llm.config.network import Network, Transfer
from spark_llm.config.nodes import Node
from spark_llm.config.router import Router
from spark_llm.config.stack import Rollout, StackConfig, Timeouts
from spark_llm.config.supervisor import Supervisor


@dataclass(frozen=True)
class GroupConfig:
    """One model's group: its deployment (model, image, engine, nodes) and the stack's own sections it runs under."""

    stack: StackConfig
    deployment: Deployment

    # ---- the model's own ----

    @property
    def model(self) -> Model:
        return self.deployment.model

    @property
    def image(self) -> Image:
        return self.deployment.image

    @property
    def engine(self) -> Engine:
        return self.deployment.engine

    @property
    def unit(self) -> str | None:
        """None: the stack's one model, or the first of several (the single form's names); else its key."""
        return self.deployment.key

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The group's nodes, in spark-llm:nodes order (the head among them)."""
        return tuple(n for n in self.stack.nodes if n.name in self.deployment.nodes)

    @property
    def head(self) -> Node:
        return self.stack.head

    @property
    def workers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "worker"]

    def with_engine(self, engine: Engine) -> GroupConfig:
        """The same group with another engine section (the router binds the engine's API to the fabric)."""
        return replace(self, deployment=replace(self.deployment, engine=engine))

    # ---- the stack's, shared by every group ----

    @property
    def ssh_key_path(self) -> str:
        return self.stack.ssh_key_path

    @property
    def network(self) -> Network:
        return self.stack.network

    @property
    def timeouts(self) -> Timeouts:
        return self.stack.timeouts

    @property
    def transfer(self) -> Transfer:
        return self.stack.transfer

    @property
    def rollout(self) -> Rollout:
        return self.stack.rollout

    @property
    def supervisor(self) -> Supervisor:
        return self.stack.supervisor

    @property
    def memory(self) -> Memory:
        return self.stack.memory

    @property
    def monitoring(self) -> Monitoring | None:
        return self.stack.monitoring

    @property
    def router(self) -> Router | None:
        return self.stack.router

    @property
    def hf_token(self) -> str | None:
        return self.stack.hf_token

    @property
    def api_key(self) -> str | None:
        return self.stack.api_key


def groups(stack: StackConfig) -> list[GroupConfig]:
    """Each model's engine group: its deployment beside the stack's own sections, in the stack file's order; the
    single form (or a list of one) is one group of today's identity."""
    return [GroupConfig(stack, d) for d in stack.deployments()]
