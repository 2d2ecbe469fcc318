"""Reads the `spark-llm:*` keys of the running Pulumi stack into a StackConfig (the program's one config read)."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import pulumi
import pulumi.runtime
from pulumi.runtime.mocks import MockMonitor

from spark_llm.config import NAMESPACE, ConfigError, StackConfig, parse, raw_from_pulumi, recipe, recipe_departures
from spark_llm.config.group import groups
from spark_llm.group.memory import parse as node_memory
from spark_llm.plan import cli_flags, drift, node_commands
from spark_llm.plan.cli_flags import GroupRequest
from spark_llm.plan.deployment import LAUNCH_TEMPLATE, DeploymentPlan, NodePlan
from spark_llm.plan.fabric_ready import fabric_faults, refusal
from spark_llm.plan.host_record import host_fields
from spark_llm.plan.observation import NodeObservation
from spark_llm.plan.placement import place
from spark_llm.plan.stack import Restore, StackPlan, build_stack
from spark_llm.remote import key_files, observe
from spark_llm.remote.pulumi_process import pulumi_process

# Pulumi's Python exec shim answers a RunError with an error line and exit code 1, to which the language host adds
# "an unhandled error occurred: program exited with non-zero exit code: 1": a refusal of bad input then reads like
# a crash. Exit code 32 is the host's "the program already showed the user an actionable message"
# (pulumi-language-python main.go, pythonProcessExitedAfterShowingUserActionableMessage; Node's SDK has the same
# code): the host adds nothing, and preview/up still fail.
SHOWN_TO_USER_EXIT_CODE = 32


class Refusal(SystemExit):
    """The program stops on the user's input, its message already shown as Pulumi's error (no traceback)."""

    def __init__(self, message: str) -> None:
        super().__init__(SHOWN_TO_USER_EXIT_CODE)
        self.message = message

    def __str__(self) -> str:
        return self.message


def refuse(message: str) -> NoReturn:
    """Show `message` as the run's one error and end the program before any resource is declared."""
    # Unbound to a resource, pulumi.log.error is one synchronous call to the engine: it is shown before the exit.
    pulumi.log.error(message)
    raise Refusal(message)


def raw_stack_config() -> dict[str, Any]:
    """Every `spark-llm:` key set for this stack (or defaulted in Pulumi.yaml), decoded."""
    return raw_from_pulumi(pulumi.runtime.config.CONFIG.get())


def secret_keys() -> set[str]:
    """The `spark-llm:` keys Pulumi holds as secrets for this stack."""
    prefix = NAMESPACE + ":"
    return {k[len(prefix) :] for k in pulumi.runtime.config.CONFIG.get() if pulumi.runtime.is_config_secret(k)}


def load() -> StackConfig:
    """Parse and validate; a bad value stops the program before any resource is declared.

    A value that is taken but will not last (an engine flag its release marks deprecated), and an API open to
    anyone (no spark-llm:apiKey), are warnings in `pulumi preview` and `up`, once per program run.
    """
    try:
        cfg = parse(raw_stack_config(), secret_keys())
    except ConfigError as err:
        # The message alone (no traceback, no "unhandled error"): it is the user's input, not our bug.
        refuse(
            f"{err}\nNothing was run on any node. Fix the key in Pulumi.{pulumi.get_stack()}.yaml "
            "(or `pulumi config set --path ...`), then run `pulumi preview` again."
        )
    for group in groups(cfg):
        for warning in group.engine.flag_warnings():
            pulumi.log.warn(warning)
    if cfg.api_key is None and not cfg.several():
        pulumi.log.warn(open_endpoint_warning(cfg))
    if cfg.several() and cfg.router is None:
        pulumi.log.warn(several_without_router_warning(cfg))
    note_recipe_departures(cfg)
    return cfg


def place_models(cfg: StackConfig, seen: list[tuple[DeploymentPlan, dict[str, NodeObservation] | None]]) -> None:
    """The models' fit per node (spark_llm.plan.placement), said in preview, with each node's MemTotal as it reports
    it (a GB10's where it could not be read) and each model's weights as its head holds them; a node they do not fit
    together stops the program before any resource is declared: nothing stops or starts."""
    memtotal: dict[str, int] = {}
    weights: dict[str, int] = {}
    for plan, observations in seen:
        for name, observation in (observations or {}).items():
            memory = node_memory(name, observation.facts)
            if memory.meminfo is not None:
                memtotal[name] = memory.meminfo["MemTotal"]
            if name == plan.head.name and memory.weights is not None:
                weights[plan.model_name] = memory.weights
    placement = place(cfg.deployments(), memtotal, weights)
    read = {n.name for n in cfg.nodes} & set(memtotal)
    whose = (
        "a GB10's MemTotal"
        if not read
        else "each node's MemTotal"
        if len(read) == len(cfg.nodes)
        else f"MemTotal as {', '.join(sorted(read))} reports it, a GB10's elsewhere"
    )
    said = f"{NAMESPACE}:models on the nodes ({whose}):" + "".join("\n    " + line for line in placement.lines())
    if not placement.fits:
        refuse(
            f"invalid stack configuration:\n  {said}\nNothing was run on any node. Lower a model's memory setting,"
            " or move it to another node, then run `pulumi preview` again."
        )
    pulumi.log.info(said)


def note_recipe_departures(cfg: StackConfig) -> None:
    """Each place the stack departs from its spark-llm:recipe, one line each: a warning for another engine, release
    or model than the recipe ran, a note for a changed image, flag or env. No recipe key: nothing."""
    if cfg.recipe is None or cfg.several():  # a recipe describes one model's stack
        return
    try:
        known = recipe.by_name(cfg.recipe)
    except recipe.RecipeError as err:  # the name is checked by the schema: a recipe file that no longer loads
        refuse(str(err))
    for line in recipe_departures.departures(known, groups(cfg)[0]):
        say = pulumi.log.warn if recipe_departures.is_warning(line) else pulumi.log.info
        say(f"stack departs from recipe {cfg.recipe}: {line}")


def open_endpoint_warning(cfg: StackConfig) -> str:
    """What `pulumi preview` says when the API takes requests from anyone who reaches it (no spark-llm:apiKey)."""
    engine = groups(cfg)[0].engine
    listen = engine.host
    where = "every address of the head" if ipaddress.ip_address(listen).is_unspecified else "that address"
    return (
        f"{NAMESPACE}:apiKey is not set: the API on {cfg.head.name} listens on {listen}:{engine.port}"
        f" ({where}) and answers anyone who reaches it. Set a key as a secret"
        f" (`pulumi config set --secret {NAMESPACE}:apiKey sk-...`: clients then send `Authorization: Bearer`),"
        f" or bind the API to one address of the head (`pulumi config set --path {NAMESPACE}:engine.host 127.0.0.1`:"
        " then reached through an ssh tunnel only)."
    )


def several_without_router_warning(cfg: StackConfig) -> str:
    """What `pulumi preview` says of several models with no router: one endpoint per model, each on the engine's
    own port, reached by anyone who reaches the head there."""
    ports = ", ".join(f"{d.name} at {d.engine.port}" for d in cfg.deployments())
    return (
        f"{NAMESPACE}:router is not set: each model answers at its own engine port on the head ({ports}), with no"
        ' one endpoint in front. Set spark-llm:router (an image pinned by digest, docs/engines.md "The router")'
        " and spark-llm:apiKey: one endpoint and one key for every model, the engines then out of reach beyond the"
        " fabric."
    )


def load_keys(stack: StackPlan) -> dict[str, str]:
    """The nodes' ssh private keys, read now (preview too): a missing key stops the program naming its config key."""
    try:
        return key_files.read_keys(stack.key_files)
    except key_files.KeyFileError as err:
        refuse(str(err))


def stack_plan(cfg: StackConfig) -> StackPlan:
    """What the stack deploys (spark_llm.plan.stack, the one builder the CLI asks too), with the weights a
    rollback's `pulumi up` puts back."""
    return build_stack(cfg, LAUNCH_TEMPLATE.read_text(), restore())


def _remove_command(node: NodePlan, container: str) -> str:
    # Through `spark-llm exec`: the stack's key, pinned host keys and jump host (a bare `ssh` has none of them).
    return node_commands.exec_on(pulumi.get_stack(), node.name, ["docker", "rm", "-f", container])


def under_mocks() -> bool:
    return isinstance(pulumi.runtime.settings.SETTINGS.monitor, MockMonitor)


def node_faults(nodes: Sequence[NodePlan], observations: dict[str, NodeObservation]) -> list[str]:
    """One line per node that cannot be read now: which node, what is wrong and what to do."""
    faults = []
    for node in nodes:
        seen = observations[node.name]
        via = node.ssh.via
        if seen.error is None:
            continue
        if via is not None and observations[via.name].error is not None and not observations[via.name].docker_down:
            faults.append(f"{node.name} cannot be read now: it is reached through {via.name}, which cannot be read.")
        elif seen.docker_down:
            faults.append(
                f"{node.name} cannot be read now: {seen.error}\n"
                f"Start the Docker engine on {node.name} "
                f"(`{node_commands.exec_on(pulumi.get_stack(), node.name, ['sudo', 'systemctl', 'start', 'docker'])}`;"
                " `docker info` there must answer): preview shows its steps as to be redone, and `pulumi up` fails "
                "until it answers."
            )
        else:
            faults.append(
                f"{node.name} cannot be read now: {seen.error}\n"
                f"Check {node.config_key}.host and .hostKey and that the node and its sshd are up: "
                "preview shows its steps as to be redone, and `pulumi up` fails until it answers."
            )
    return faults


def each_node(observations: Sequence[dict[str, NodeObservation] | None]) -> dict[str, NodeObservation]:
    """Every node's observation once, the first group's that read it (groups in the stack's order)."""
    every: dict[str, NodeObservation] = {}
    for group in observations:
        for name, observation in (group or {}).items():
            every.setdefault(name, observation)
    return every


def observe_nodes(
    stack: StackPlan, extras: Sequence[Callable[[NodePlan], str]]
) -> list[dict[str, NodeObservation] | None]:
    """What every node runs now, for each group in the stack's order: one read-only ssh session a node, whatever
    the number of models (spark_llm.remote.observe.observe_stack). Stops before anything runs if a node already runs
    a container under an engine's name that spark-llm did not start (a deployment made by hand), or if a node's
    fabric is not ready for a start (spark_llm.plan.fabric_ready: its RoCE devices, its fabric MTUs).

    `extras[i](node)`: more read-only probe sections of group i for that node (the weights' live digest). [None...]
    under Pulumi's mocks (unit tests): a mocked program must never reach the stack's real addresses.
    """
    if under_mocks():
        return [None for _ in stack.groups]
    seen = observe.observe_stack(list(zip(stack.groups, extras, strict=True)))
    # Each node once (its faults, its host key, its RDMA devices are the node's, whichever group read it).
    every = each_node(seen)
    first = stack.first
    refused = sorted({o.host_key_refused for o in every.values() if o.host_key_refused})
    if refused:
        # A host key that is not the pinned one fails preview too: no provider may be declared with that pin.
        refuse(
            "\n".join(node_commands.host_key_refused(first, pulumi.get_stack(), name) for name in refused)
            + "\nNothing was run on any node."
        )
    faults = node_faults(stack.nodes, every)
    if faults and not pulumi.runtime.is_dry_run():
        # Every node has steps to redo while it cannot be read: `up` would fail at one of them, after the steps on
        # the other nodes had run (an engine stopped). Stop here instead, before anything runs anywhere.
        refuse(
            "\n".join(faults) + "\nNothing was run on any node (no engine was stopped). Once the node answers, "
            "run `pulumi up` again: it restarts what the fault stopped, in order."
        )
    for fault in faults:
        pulumi.log.warn(fault)
    # The RoCE devices and the fabric MTUs (spark_llm.plan.fabric_ready): NCCL takes a missing or down device
    # without an error, and Docker's refusal of a node without /dev/infiniband comes after the group was stopped.
    # Refused at preview as at `up`, whose program run this is: nothing has stopped yet.
    hosts = {n.name: host_fields(every[n.name].facts) for n in stack.nodes if every[n.name].reachable}
    not_ready = fabric_faults(first, hosts, node_commands.StackRef(pulumi.get_stack()))
    if not_ready:
        refuse(refusal(not_ready))
    for plan, observations in zip(stack.groups, seen, strict=True):
        _refuse_foreign(plan, observations)
    return list(seen)


def _refuse_foreign(plan: DeploymentPlan, observations: dict[str, NodeObservation]) -> None:
    """Stop when a node runs a container under this group's engine name that spark-llm did not start."""
    foreign = drift.foreign_containers(observations)
    if not foreign:
        return
    lines = [
        f"{name} already runs a container named {plan.container} that this stack's `pulumi up` did not start "
        f"({observations[name].engine.status}, id {observations[name].engine.container_id[:12]}, "
        "by hand or by an older spark-llm); spark-llm's own container needs that name."
        for name in foreign
    ]
    nodes = {n.name: n for n in plan.nodes}
    fixes = [f"  {_remove_command(nodes[name], plan.container)}" for name in foreign]
    refuse(
        "\n".join(lines)
        + "\nNothing was run on any node. Stop and remove it (this ends that engine), then run `pulumi up`:\n"
        + "\n".join(fixes)
        + "\n(or set spark-llm:engine.containerName to another name to keep it running beside ours)."
    )


def group_request(plan: DeploymentPlan) -> GroupRequest:
    """What this run's `pulumi` command line asks of the engine group (spark_llm.plan.cli_flags); a `--target` that
    would restart part of it is refused here, before any resource is declared."""
    cli = None if under_mocks() else pulumi_process()
    # Among several models, a `--replace` of another model's container is not this group's.
    members = [n.name for n in plan.nodes]
    request = cli_flags.group_request(cli.argv if cli else [], members, cli_flags.engine_component(plan.unit))
    if request.refusal:
        refuse(request.refusal)
    return request


RESTORE_ENV = "SPARK_LLM_RESTORE_WEIGHTS"
RESTORE_MODEL_ENV = "SPARK_LLM_RESTORE_MODEL"


def restore() -> Restore | None:
    """The weights a rollback's `pulumi up` puts back (spark_llm.ops.rollback sets them; None otherwise): a digest,
    and the one model it is for when a rollback names one (`--model`): the others keep theirs."""
    value = os.environ.get(RESTORE_ENV, "").strip()
    if not value:
        return None
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        refuse(f"{RESTORE_ENV}={value!r} is not a weights manifest digest (64 hex digits); unset it")
    return Restore(value, os.environ.get(RESTORE_MODEL_ENV, "") or None)
