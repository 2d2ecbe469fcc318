"""The stack's configuration, typed: parsed once from `spark-llm:*` keys into pydantic models.

Every key here is also declared in Pulumi.yaml `config:` (type, description, default); tests check the two
agree. An invalid value raises ConfigError naming the key path (as written in Pulumi.<stack>.yaml) and an
example of a valid value, before any resource is declared, so nothing runs on any node.

The nodes and the rules between them are in spark_llm.config.nodes; the model base, number types and error
messages in spark_llm.config.base; each section in a module of its own. Import from `spark_llm.config`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from spark_llm.config.base import (
    NAMESPACE,
    ConfigError,
    ConfigModel,
    Int,
    KeyedError,
    SeveralKeyedError,
    closest,
)
from spark_llm.config.base import format_errors as _format_errors
from spark_llm.config.engine import Engine
from spark_llm.config.image import Image
from spark_llm.config.memory import Memory
from spark_llm.config.model import Model
from spark_llm.config.models import (
    Deployment,
    ModelDeployment,
    check_models,
    deployments,
    single_form_given,
)
from spark_llm.config.monitoring import Monitoring, check_monitoring_ports
from spark_llm.config.network import Network, Transfer
from spark_llm.config.nodes import Node, check_topology
from spark_llm.config.recipe import known_names
from spark_llm.config.router import Router, check_router_port
from spark_llm.config.supervisor import Supervisor


class Timeouts(ConfigModel):
    """How long `pulumi up` waits for each long step before it fails with what it saw."""

    ready_seconds: Int = Field(
        900, ge=10, le=86400, description="Rank 0 answering a one-token completion", json_schema_extra={"example": 1800}
    )
    transfer_seconds: Int = Field(
        6 * 3600,
        ge=60,
        le=7 * 86400,
        description="The weights copy from the head to all workers (scripts/fanout.py)",
        json_schema_extra={"example": 21600},
    )
    fabric_idle_seconds: Int = Field(
        60,
        ge=5,
        le=3600,
        description="The weights copy fails when no data moved over the fabric for this long (a cut link)",
        json_schema_extra={"example": 120},
    )
    startup_grace_seconds: Int = Field(
        5, ge=1, le=300, description="A started container must stay up this long", json_schema_extra={"example": 10}
    )
    stall_seconds: Int | None = Field(
        None,
        ge=5,
        le=86400,
        description=(
            "A start phase with no new engine log line for this long fails `pulumi up`, naming the node and phase"
            " (default: per phase, 300 to 1800 s)"
        ),
        json_schema_extra={"example": 600},
    )


class Rollout(ConfigModel):
    """What happens when a relaunch fails to start (a crash, a stall, no answer within readySeconds)."""

    on_failure: Literal["stop", "rollback"] = Field(
        "stop",
        description=(
            "stop: `pulumi up` fails and prints the one command that brings back the last good revision;"
            " rollback: that command starts by itself"
        ),
        json_schema_extra={"example": "rollback"},
    )
    probation_seconds: Int = Field(
        0,
        ge=0,
        le=3600,
        description=(
            "After rank 0's first answer, how long `pulumi up` keeps watching the new start: a member that stops, or"
            " rank 0 answering nothing for supervisor.wedgeSeconds, within it is a failed start (onFailure applies;"
            " the weights' kept version stays on every node until a start passes it). 0: `up` ends at the first"
            " answer and the canary, and what follows is the supervisor's"
        ),
        json_schema_extra={"example": 120},
    )


class StackConfig(ConfigModel):
    """Everything the program reads from `spark-llm:*` keys."""

    ssh_key_path: str = Field(
        "~/.ssh/id_ed25519",
        description="SSH private key used for every node",
        json_schema_extra={"example": "~/.ssh/id_ed25519"},
    )
    nodes: list[Node] = Field(
        min_length=1,
        description="The head and its workers",
        json_schema_extra={"example": "[{name: spark-1, role: head, ...}]"},
    )
    # The single form's model and image; None when spark-llm:models lists the models instead. The plan reads each
    # model's own through `groups()`, never these.
    model: Model | None = Field(
        None,
        description="The model served: its name in the API, its weights' source, and their directory on every node"
        " (or list it in spark-llm:models)",
    )
    image: Image | None = Field(
        None, description="The engine's container image and how it reaches every node (or in spark-llm:models)"
    )
    engine: Engine = Field(default_factory=Engine)
    models: list[ModelDeployment] | None = Field(
        None,
        description=(
            "The stack's models, each with the keys of spark-llm:model plus image, engine and nodes, instead of"
            " spark-llm:model, image and engine; each model's memory budget is its engine's own setting"
            " (--gpu-memory-utilization, --mem-fraction-static or --kv-cache-memory-bytes in engine.flags), summed"
            " per node; each model's nodes include the head, where the router serves them all (spark-llm:router)"
        ),
        json_schema_extra={"example": "[{name: qwen, path: /models/qwen, image: {ref: ...}, engine: {...}}]"},
    )
    network: Network = Field(default_factory=Network)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    transfer: Transfer = Field(default_factory=Transfer)
    rollout: Rollout = Field(default_factory=Rollout)
    supervisor: Supervisor = Field(default_factory=Supervisor)
    memory: Memory = Field(default_factory=Memory)
    router: Router | None = Field(
        None,
        description=(
            "One endpoint on the head in front of the engines (docs/engines.md, The router): the stack's apiKey is"
            " checked there, and the engines' API listens on the head's fabric address only"
        ),
        json_schema_extra={"example": "{image: REPO@sha256:..., port: 4000}"},
    )
    monitoring: Monitoring | None = Field(
        None,
        description=(
            "Prometheus on the head and a node exporter on every node, scraping what the stack deployed"
            " (docs/monitoring.md); its port asks for monitoringPassword"
        ),
        json_schema_extra={"example": "{image: REPO@sha256:..., nodeExporterImage: REPO@sha256:...}"},
    )
    hf_token: str | None = Field(
        None,
        description="Hugging Face token (a Pulumi secret: `pulumi config set --secret hfToken`)",
        json_schema_extra={"example": "hf_...", "secret": True},
    )
    api_key: str | None = Field(
        None,
        description=(
            "API key the endpoint requires (a Pulumi secret: `pulumi config set --secret apiKey`);"
            " the head's engine reads it from a 0600 file"
        ),
        json_schema_extra={"example": "sk-...", "secret": True},
    )
    monitoring_password: str | None = Field(
        None,
        description=(
            "The password of Prometheus's basic auth, user spark-llm (a Pulumi secret:"
            " `pulumi config set --secret monitoringPassword`); the head holds only its bcrypt hash"
        ),
        json_schema_extra={"example": "a-long-random-phrase", "secret": True},
    )
    monitoring_webhook: str | None = Field(
        None,
        description=(
            "Where Alertmanager posts the firing alerts (a webhook URL, a Pulumi secret: `pulumi config set --secret"
            " monitoringWebhook https://...`); with spark-llm:monitoring.alertmanagerImage"
        ),
        json_schema_extra={"example": "https://hooks.example.com/spark-llm", "secret": True},
    )

    recipe: str | None = Field(
        None,
        description=(
            "The recipe (recipes/, `spark-llm recipes`) this stack started from: preview and up note where the stack"
            " departs from it"
        ),
        json_schema_extra={"example": "qwen3.5-122b-a10b-fp8-vllm-ray"},
    )

    @field_validator("recipe")
    @classmethod
    def _known_recipe(cls, v: str | None) -> str | None:
        if v is not None and v not in known_names():
            raise KeyedError(
                f"no recipe {v!r}; known recipes: {', '.join(known_names())} (`spark-llm recipes` lists them)",
                (),
                show_example=False,
            )
        return v

    @field_validator("nodes")
    @classmethod
    def _topology(cls, nodes: list[Node]) -> list[Node]:
        return check_topology(nodes)

    @field_validator("models")
    @classmethod
    def _models(cls, models: list[ModelDeployment] | None, info: ValidationInfo) -> list[ModelDeployment] | None:
        if models is None:
            return None
        if not models:
            why = f"an empty list serves no model: list at least one, or remove the key and set {NAMESPACE}:model"
            raise KeyedError(why, (), "[{name: qwen, path: /models/qwen, image: {ref: vllm/vllm-openai}}]")
        nodes = info.data.get("nodes")
        mistakes = check_models(models, nodes) if nodes is not None else []  # bad nodes are named under nodes
        if mistakes:
            raise SeveralKeyedError(mistakes)
        return models

    @model_validator(mode="after")
    def _a_model(self) -> StackConfig:
        if self.models:
            return self
        for key, value in (("model", self.model), ("image", self.image)):
            if value is None:
                raise KeyedError(f"required: this key is missing (or list the models in {NAMESPACE}:models)", (key,))
        return self

    @model_validator(mode="after")
    def _router(self) -> StackConfig:
        if self.router is None:
            return self
        head = self.head.name
        for d in self.deployments():
            engine_key = f"{NAMESPACE}:engine" if not self.models else f"{d.config_key}.engine"
            collision = check_router_port(self.router, d.engine, engine_key) if head in d.nodes else None
            if collision is not None:
                raise KeyedError(str(collision), ("router", *collision.loc), collision.example)
        if self.api_key is None:
            why = "the router checks the stack's API key: set one with `pulumi config set --secret apiKey sk-...`"
            raise KeyedError(why, ("apiKey",), show_example=False)
        return self

    @model_validator(mode="after")
    def _monitoring(self) -> StackConfig:
        if self.monitoring is None:
            if self.monitoring_webhook is not None:
                why = "alerts come from spark-llm:monitoring's Prometheus: set that section too, or remove this key"
                raise KeyedError(why, ("monitoringWebhook",), show_example=False)
            return self
        webhook, image = self.monitoring_webhook, self.monitoring.alertmanager_image
        if webhook is not None and not webhook.startswith(("http://", "https://")):
            raise KeyedError(
                "a webhook URL starts with http:// or https://", ("monitoringWebhook",), show_example=False
            )
        if webhook is not None and image is None:
            why = "Alertmanager posts to monitoringWebhook: name its image (prom/alertmanager, pinned)"
            raise KeyedError(why, ("monitoring", "alertmanagerImage"), "prom/alertmanager@sha256:...")
        if image is not None and webhook is None:
            why = "Alertmanager runs to post alerts to it: `pulumi config set --secret monitoringWebhook https://...`"
            raise KeyedError(why, ("monitoringWebhook",), show_example=False)
        head = self.head.name
        on_head = [d for d in self.deployments() if head in d.nodes]
        engines = [(d.engine, f"{NAMESPACE}:engine" if not self.models else f"{d.config_key}.engine") for d in on_head]
        collision = check_monitoring_ports(self.monitoring, engines, self.router)
        if collision is not None:
            raise KeyedError(str(collision), ("monitoring", *collision.loc), collision.example)
        if self.monitoring_password is None:
            why = (
                "Prometheus's port asks for a password: set one with"
                ' `pulumi config set --secret monitoringPassword "$(openssl rand -hex 16)"`'
            )
            raise KeyedError(why, ("monitoringPassword",), show_example=False)
        return self

    def deployments(self) -> list[Deployment]:
        """The stack's models as one list, whichever form the stack file uses (spark_llm.config.models)."""
        # The single form: both keys are required there (`_a_model`), so both are set whenever `model` is.
        single = (self.model, self.image, self.engine) if self.model is not None and self.image is not None else None
        return deployments(self.nodes, self.models, single)

    def several(self) -> bool:
        """The stack lists several models (spark-llm:models): one engine group each, behind the router."""
        return bool(self.models) and len(self.models or []) > 1

    @property
    def head(self) -> Node:
        return next(n for n in self.nodes if n.role == "head")

    @property
    def workers(self) -> list[Node]:
        return [n for n in self.nodes if n.role == "worker"]


# ---------- loading ----------

# Keys whose values must be Pulumi secrets (encrypted in the stack file and in state).
SECRET_KEYS = tuple(
    field.alias or name
    for name, field in StackConfig.model_fields.items()
    if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get("secret")
)

# Top-level keys as written in Pulumi.<stack>.yaml (without the namespace) -> field name.
TOP_LEVEL_KEYS = {field.alias or name: name for name, field in StackConfig.model_fields.items()}


def format_errors(err: ValidationError) -> str:
    """A StackConfig ValidationError as one line per mistake: the key, what is wrong, a valid value."""
    return _format_errors(StackConfig, err)


def decode_value(raw: str) -> Any:
    """Pulumi hands every value over as a string: objects and lists as JSON, scalars as written."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def raw_from_pulumi(values: Mapping[str, str]) -> dict[str, Any]:
    """`{"spark-llm:key": "text"}` as Pulumi gives it (to the program, or `pulumi config --json`) -> `{key: value}`.

    The program and the operator CLI both read the stack's config through this, then `parse`.
    """
    prefix = NAMESPACE + ":"
    return {k[len(prefix) :]: decode_value(v) for k, v in values.items() if k.startswith(prefix)}


def parse(raw: Mapping[str, Any], secret_keys: set[str] | None = None) -> StackConfig:
    """Parse `{key: value}` (keys without namespace, values already decoded from JSON/YAML).

    `secret_keys` are the keys Pulumi holds as secrets; a secret-only key given in plain text is refused.
    When None (pure tests), secrecy is not checked.
    """
    # Optional keys are declared in Pulumi.yaml with default "" (Pulumi requires a default): "" means unset.
    raw = {k: v for k, v in raw.items() if v != "" and not (k in ("router", "monitoring") and v == {})}
    if secret_keys is not None:
        plain = [k for k in SECRET_KEYS if k in raw and k not in secret_keys]
        if plain:
            key = plain[0]
            raise ConfigError(
                f"{NAMESPACE}:{key} is given in plain text; it must be a secret. "
                f"Remove it and set it with `pulumi config set --secret {key} <value>`"
            )
    unknown = sorted(set(raw) - set(TOP_LEVEL_KEYS))
    if unknown:
        lines = []
        for key in unknown:
            guess = closest(key, TOP_LEVEL_KEYS)
            hint = f"; did you mean {NAMESPACE}:{guess}?" if guess else ""
            lines.append(f"{NAMESPACE}:{key}: unknown configuration key{hint}")
        raise ConfigError(
            "invalid stack configuration:\n  "
            + "\n  ".join(lines)
            + f"\n  known keys: {', '.join(sorted(TOP_LEVEL_KEYS))}"
        )
    raw, extra = _one_form(raw)
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as err:
        message = format_errors(err)
        raise ConfigError("".join([message, *("\n  " + line for line in extra)])) from None
    if extra:
        raise ConfigError("invalid stack configuration:" + "".join("\n  " + line for line in extra))
    return cfg


def _one_form(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """`raw` without what Pulumi.yaml's defaults fill in for an unset key, and a line for each single-form key set
    beside spark-llm:models (a stack takes one form)."""
    # Pulumi requires a default for a declared optional key, {} for an object: that means unset. spark-llm:models is
    # not declared (spark_llm.config.schema_docs.UNDECLARED): an empty list there is the stack's own, and refused.
    raw = {k: v for k, v in raw.items() if not (k in ("model", "image") and v == {})}
    if not raw.get("models"):
        return raw, []
    given = single_form_given(raw)
    lines = [
        f"{NAMESPACE}:{key}: a stack takes the single form ({NAMESPACE}:model, image, engine) or {NAMESPACE}:models,"
        f" not both: move its keys into the entry of {NAMESPACE}:models, or remove {NAMESPACE}:models"
        for key in given
    ]
    return {k: v for k, v in raw.items() if k not in (*given, "engine")}, lines
