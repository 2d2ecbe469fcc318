"""Pure: what the stack deploys, answered once for the program and the operator's CLI alike.

`build_stack` turns the parsed config into the stack's hosts (every node once: how ssh reaches it, its key file),
one group plan per model (spark_llm.plan.deployment.build_plan, each on those hosts) and the router in front of
them. `__main__` declares its resources from it; `spark-llm` (spark_llm.ops.pulumi_cli) acts on the same answer:
there is no second builder to drift from this one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from spark_llm.config import StackConfig
from spark_llm.config.group import groups
from spark_llm.plan.deployment import DeploymentPlan, NodePlan, build_plan
from spark_llm.plan.hosts import KeyFile, SshHost, key_files, ssh_hosts
from spark_llm.plan.router import RouterPlan, engine_worker, router_plan


class ModelChoiceError(ValueError):
    """`--model` missing where the stack lists several, or naming no model of the stack: one line, exit 2."""


@dataclass(frozen=True)
class Restore:
    """A rollback's `pulumi up` (spark_llm.ops.rollback): the weights digest the last good start served, and the one
    model it is for (None: every model, as a stack of one has)."""

    digest: str
    model: str | None = None

    def for_model(self, name: str) -> str | None:
        return self.digest if self.model is None or self.model == name else None


@dataclass(frozen=True)
class StackPlan:
    """What the stack deploys: its hosts, each model's engine group on them, the router in front."""

    config: StackConfig
    """The parsed stack, for what is said of it as a whole (its warnings, the models' fit)."""
    hosts: dict[str, SshHost]
    """Every node of spark-llm:nodes as ssh reaches it, in the stack file's order, resolved once."""
    key_files: dict[str, KeyFile]
    """Every node's ssh key file, resolved once (the program reads them, the CLI checks their modes)."""
    models: dict[str, DeploymentPlan]
    """Each model's group plan by its name (the API's `model`), in the stack file's order: one for a stack of one."""
    router: RouterPlan | None = None
    """spark-llm:router in front of the models (None: none)."""
    several: bool = False
    """The stack lists several models: their outputs are under `models.<name>`, also when a command acts on one of
    them (`only`); the first keeps the single form's names, so its plan alone cannot say so."""

    @classmethod
    def one(cls, plan: DeploymentPlan) -> StackPlan:
        """The stack of one group, from that group's plan alone (a plan built by `build_plan` directly)."""
        hosts = {n.name: n.ssh for n in plan.nodes}
        return cls(config=plan.config.stack, hosts=hosts, key_files=plan.key_files, models={plan.model_name: plan})

    @property
    def groups(self) -> list[DeploymentPlan]:
        return list(self.models.values())

    @property
    def nodes(self) -> list[NodePlan]:
        """Every node of the stack once, as the first group that runs on it plans it, the head first."""
        seen: dict[str, NodePlan] = {}
        for plan in self.models.values():
            for node in plan.nodes:
                seen.setdefault(node.name, node)
        return sorted(seen.values(), key=lambda n: n.rank != 0)

    @property
    def first(self) -> DeploymentPlan:
        """The first model's group: it keeps the single form's names (and, for now, runs the router's supervisor)."""
        return next(iter(self.models.values()))

    def only(self, model: str) -> StackPlan:
        """This stack with the one model `--model` names; raises ModelChoiceError as `choose` does."""
        return replace(self, models={model: self.choose(model)})

    def choose(self, model: str | None) -> DeploymentPlan:
        """The plan of the model `--model` names (None: the stack's one model); raises ModelChoiceError."""
        return choose(self.models, model)


def choose(plans: dict[str, DeploymentPlan], model: str | None) -> DeploymentPlan:
    """The plan of the model `--model` names (None: the stack's one model)."""
    names = ", ".join(plans)
    if model is None:
        if len(plans) == 1:
            return next(iter(plans.values()))
        raise ModelChoiceError(f"the stack serves {len(plans)} models: name one with --model ({names})")
    if model in plans:
        return plans[model]
    if len(plans) == 1:
        raise ModelChoiceError(f"--model {model}: the stack serves one model, {names} (--model can be left out)")
    raise ModelChoiceError(f"--model {model}: the stack serves no model of that name; its models: {names}")


def build_stack(cfg: StackConfig, template: str, restore: Restore | None = None) -> StackPlan:
    """The stack's one plan: hosts once, a group plan per model on them, the router for every group's engine."""
    hosts = ssh_hosts(cfg)
    models = {
        group.deployment.name: build_plan(
            group, template, restore.for_model(group.deployment.name) if restore else None, hosts
        )
        for group in groups(cfg)
    }
    routed = router_plan(cfg, [engine_worker(plan) for plan in models.values()])
    return StackPlan(
        config=cfg, hosts=hosts, key_files=key_files(cfg), models=models, router=routed, several=len(models) > 1
    )
