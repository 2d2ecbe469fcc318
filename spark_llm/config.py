"""The stack's configuration, typed: parsed once from `spark-llm:*` keys into pydantic models.

Every key here is also declared in Pulumi.yaml `config:` (type, description, default); tests check the two
agree. An invalid value raises ConfigError naming the key path (as written in Pulumi.<stack>.yaml) and an
example of a valid value, before any resource is declared, so nothing runs on any node.

The nodes and the rules between them are in spark_llm.config_nodes; the model base, number types and error
messages in spark_llm.config_base. Import from here: `parse`, `StackConfig`, `ConfigError`, `Node`, ...
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, ValidationInfo, field_validator, model_validator

from spark_llm import engine_flags
from spark_llm.config_base import (
    NAMESPACE,
    ConfigError,
    ConfigModel,
    Int,
    KeyedError,
    Port,
    SeveralKeyedError,
    closest,
)
from spark_llm.config_base import format_errors as _format_errors
from spark_llm.config_nodes import ListenIp, Node, NodeName, check_topology
from spark_llm.engines.vllm import RAY_AUTH_ENV, RAY_PORT

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _abs_path(v: str) -> str:
    if not v.startswith("/") or "\n" in v or "'" in v:
        raise ValueError("must be an absolute path without quotes or newlines")
    path = v.rstrip("/")
    if not path:
        raise ValueError("is the root directory: give the weights a directory of their own")
    return path


AbsPath = Annotated[str, AfterValidator(_abs_path)]


def _image_ref(v: str) -> str:
    """The mistakes `docker pull` would refuse late, on a node: spaces, a URL, uppercase, an empty tag."""
    if not v.strip() or any(c.isspace() for c in v):
        raise ValueError("must be one reference without spaces: REPOSITORY[:TAG][@sha256:DIGEST]")
    if "://" in v:
        raise ValueError("is a URL: write the reference as `docker pull` takes it, e.g. lmsysorg/sglang:spark")
    name = v.split("@", 1)[0]
    first, slash, rest = name.partition("/")
    has_registry = bool(slash) and ("." in first or ":" in first or first == "localhost")
    repository, colon, tag = (rest if has_registry else name).partition(":")
    if (colon and not tag) or v.endswith("@"):
        raise ValueError("has an empty tag or digest: write the tag after ':' (or leave ':' out for latest)")
    if repository != repository.lower():
        raise ValueError(f"must be lowercase (docker refuses {repository!r}): {repository.lower()}")
    return v


ImageRef = Annotated[str, AfterValidator(_image_ref)]


# ---------- sections ----------


class Image(ConfigModel):
    """The engine's container image and how it reaches every node."""

    ref: ImageRef = Field(
        description="Image reference as `docker run` takes it",
        json_schema_extra={"example": "lmsysorg/sglang:spark"},
    )
    # present: already on every node (checked); pull: `docker pull` on each node; transfer: from `source` to every
    # node that lacks it, over the fabric from the head (the layers a worker lacks through a registry on the head,
    # spark_llm.image_registry; `docker save | load` without one).
    mode: Literal["present", "pull", "transfer"] = Field(
        "present",
        description="present (checked), pull on each node, or transfer to the nodes that lack it",
        json_schema_extra={"example": "transfer"},
    )
    source: Literal["head", "operator"] = Field(
        "head",
        description="With mode transfer: where the image is (the head, or this machine's docker)",
        json_schema_extra={"example": "head"},
    )
    platform: Literal["linux/arm64", "linux/amd64"] = Field(
        "linux/arm64", description="Platform every node must run", json_schema_extra={"example": "linux/arm64"}
    )

    @model_validator(mode="after")
    def _source_only_when_transferred(self) -> Image:
        # Only mode transfer reads `source`: `source: operator` with another mode would move nothing from here.
        if self.source == "operator" and self.mode != "transfer":
            why = f"source operator is read by mode transfer only (mode is {self.mode}): set mode: transfer"
            raise KeyedError(why, ("mode",), "transfer")
        return self


_REVISION = re.compile(r"^[0-9a-f]{40}$")
_HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class ModelSource(ConfigModel):
    """Where the weights come from: a pinned Hugging Face revision, a directory on the head, or one here."""

    kind: Literal["huggingface", "head", "local"] = Field(
        description="huggingface (download on the head), head (a directory there), local (upload from here)",
        json_schema_extra={"example": "huggingface"},
    )
    repo: str | None = Field(
        None,
        description="Hugging Face repo (kind huggingface)",
        json_schema_extra={"example": "Qwen/Qwen3.5-122B-A10B-FP8"},
    )
    revision: str | None = Field(
        None,
        description="Pinned commit of the repo, 40 hex digits (kind huggingface)",
        json_schema_extra={"example": "0123456789abcdef0123456789abcdef01234567"},
    )
    path: str | None = Field(
        None,
        description="Directory on the head (kind head) or on this machine (kind local)",
        json_schema_extra={"example": "/home/aurora/models/Qwen3.5-122B-A10B-FP8"},
    )

    @model_validator(mode="after")
    def _fields_for_kind(self) -> ModelSource:
        if self.kind == "huggingface":
            if not self.repo or not _HF_REPO.match(self.repo):
                raise KeyedError("kind huggingface needs repo: OWNER/NAME as on huggingface.co", ("repo",))
            if not self.revision or not _REVISION.match(self.revision):
                why = "kind huggingface needs revision: the full 40-hex commit to pin (a branch name moves under you)"
                raise KeyedError(why, ("revision",))
            if self.path is not None:
                raise KeyedError("kind huggingface takes no path (the weights go to model.path): remove it", ("path",))
            return self
        for extra in ("repo", "revision"):
            if getattr(self, extra) is not None:
                raise KeyedError(f"kind {self.kind} takes no {extra} (kind huggingface does): remove it", (extra,))
        if not self.path:
            raise KeyedError(f"kind {self.kind} needs path: the weights directory", ("path",))
        if self.kind == "head":
            try:
                _abs_path(self.path)
            except ValueError as err:
                raise KeyedError(f"{err} on the head", ("path",)) from None
        elif not Path(os.path.expanduser(self.path)).is_dir():
            why = f"local weights directory {self.path} does not exist on this machine (relative to the project)"
            raise KeyedError(why, ("path",))
        return self


class Model(ConfigModel):
    """The model served: its name in the API, its weights' source, and their directory on every node."""

    name: str = Field(
        min_length=1,
        description="Model name served by the API",
        json_schema_extra={"example": "Qwen/Qwen3.5-122B-A10B-FP8"},
    )
    path: AbsPath = Field(
        description="Weights directory, the same path on every node",
        json_schema_extra={"example": "/home/aurora/models/Qwen3.5-122B-A10B-FP8"},
    )
    source: ModelSource | None = Field(
        None,
        description="Where the weights come from (default: already at path on the head)",
        json_schema_extra={"example": {"kind": "huggingface", "repo": "Qwen/Qwen3.5-122B-A10B-FP8", "revision": "..."}},
    )
    purge_on_destroy: bool = Field(
        False,
        description="Delete the weights from every node on `pulumi destroy` (default: keep them)",
        json_schema_extra={"example": False},
    )

    @property
    def effective_source(self) -> ModelSource:
        return self.source or ModelSource(kind="head", path=self.path)


class Network(ConfigModel):
    """The fabric between the nodes: interface names for NCCL/Gloo and the key the head uses to reach workers."""

    fabric_interfaces: list[str] = Field(
        default_factory=list,
        description="Fabric interface names, e.g. the Spark's ConnectX-7 port (NCCL/GLOO_SOCKET_IFNAME)",
        json_schema_extra={"example": ["enp1s0f0np0"]},
    )
    roce_devices: list[str] = Field(
        default_factory=list,
        description="RDMA devices for NCCL_IB_HCA (both RoCE twins of a Spark port)",
        json_schema_extra={"example": ["rocep1s0f0", "roceP2p1s0f0"]},
    )
    fabric_key_path: str = Field(
        "~/.ssh/id_ed25519",
        description="Key on the head that logs in to the workers over the fabric (weights, images)",
        json_schema_extra={"example": "~/.ssh/id_ed25519"},
    )
    mtu: Int = Field(
        9000, ge=576, le=9216, description="MTU the fabric is expected to carry", json_schema_extra={"example": 9000}
    )

    @field_validator("fabric_interfaces", "roce_devices")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for i, name in enumerate(v):
            if not re.match(r"^[A-Za-z0-9_.:-]{1,15}$", name):
                raise KeyedError(
                    f"{name!r} is not a network interface or device name (1-15 letters, digits, '_', '.', ':' or '-')",
                    (i,),
                )
        return v


class Transfer(ConfigModel):
    """How the weights cross the fabric from the head to the workers (scripts/fanout.py)."""

    streams: Int | None = Field(
        None,
        ge=1,
        le=32,
        description="Parallel rsync streams per sending and per receiving node (default: the head's cores, at most 4)",
        json_schema_extra={"example": 4},
    )
    encrypt: bool = Field(
        False,
        description=(
            "rsync over ssh from the head only (AES-GCM, slower, no worker-to-worker relay); default: rsync daemons"
            " bound to the fabric addresses with a one-time secret, data unencrypted on the direct link"
        ),
        json_schema_extra={"example": False},
    )


class Timeouts(ConfigModel):
    """How long `pulumi up` waits for each long step before it fails with what it saw."""

    ready_seconds: Int = Field(
        900, ge=10, description="Rank 0 answering a one-token completion", json_schema_extra={"example": 1800}
    )
    transfer_seconds: Int = Field(
        6 * 3600,
        ge=60,
        description="The weights copy from the head to all workers (scripts/fanout.py)",
        json_schema_extra={"example": 21600},
    )
    startup_grace_seconds: Int = Field(
        5, ge=1, le=300, description="A started container must stay up this long", json_schema_extra={"example": 10}
    )


class Engine(ConfigModel):
    """The inference engine: which release, its serving ports, and its extra flags (checked against that release)."""

    kind: Literal["sglang", "vllm"] = Field(
        "sglang", description="Inference engine: sglang or vllm", json_schema_extra={"example": "vllm"}
    )
    executor: Literal["native", "ray"] = Field(
        "native",
        description="How the ranks find each other: native (engine's own multi-node) or ray (vLLM only)",
        json_schema_extra={"example": "ray"},
    )
    gpus: bool = Field(
        True,
        description="Give containers the GPUs (`--gpus all`); false only on nodes without GPUs (the sim)",
        json_schema_extra={"example": True},
    )
    version: str = Field(
        engine_flags.newest_version("sglang"),
        description="Engine release the image runs; flags are checked against its catalog (default: newest known)",
        json_schema_extra={"example": "0.5.17"},
    )
    port: Port = Field(30000, description="HTTP port of the API on the head", json_schema_extra={"example": 30000})
    host: ListenIp = Field(
        "0.0.0.0",
        description="Address of the head the API listens on (0.0.0.0: every address; one address: only there)",
        json_schema_extra={"example": "192.168.1.10"},
    )
    dist_port: Port = Field(
        20000, description="Rendezvous port on the head's fabric address", json_schema_extra={"example": 20000}
    )
    container_name: NodeName = Field(
        "spark-llm-engine",
        description="Engine container name on every node",
        json_schema_extra={"example": "spark-llm-engine"},
    )
    flags: list[str] = Field(
        default_factory=list,
        description="Extra engine flags, each spelled in full; checked against the release's catalog",
        json_schema_extra={"example": ["--mem-fraction-static", "0.8"]},
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Extra engine environment (env file, mode 0600)",
        json_schema_extra={"example": {"NCCL_DEBUG": "INFO"}},
    )

    @field_validator("env", mode="before")
    @classmethod
    def _env_values_as_text(cls, v: Any) -> Any:
        # `pulumi config set --path engine.env.X 1` stores a number; an environment only holds text.
        if isinstance(v, dict):
            return {
                k: str(x).lower() if isinstance(x, bool) else str(x) if isinstance(x, int | float) else x
                for k, x in v.items()
            }
        return v

    @field_validator("env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        # Every bad entry at once: fixing one only to meet the next in another preview wastes a round.
        mistakes = []
        for key, value in v.items():
            if not _ENV_NAME.match(key):
                mistakes.append(
                    KeyedError(f"{key!r} is not a valid environment variable name (letters, digits, '_')", ())
                )
            elif "\n" in value or "\0" in value:
                mistakes.append(KeyedError("must be one line: the env file holds one variable a line", (key,), "INFO"))
        if mistakes:
            raise SeveralKeyedError(mistakes)
        return v

    @model_validator(mode="after")
    def _ray_is_vllm_only(self) -> Engine:
        if self.kind == "sglang" and self.executor != "native":
            why = "executor ray is for kind vllm; SGLang runs its own multi-node launch (executor: native)"
            raise KeyedError(why, ("executor",), "native")
        return self

    @model_validator(mode="after")
    def _ray_auth_is_spark_llms(self) -> Engine:
        # An env file line is loaded after the container's environment: it would switch Ray's token authentication
        # off or swap the stack's token for another, on every node at once.
        if self.executor == "ray":
            for name in sorted(set(self.env) & RAY_AUTH_ENV):
                why = (
                    "set by spark-llm with executor ray: every Ray process runs with Ray's token authentication and"
                    " reads the stack's own token from its 0600 file (README, Security: Ray); remove this key"
                )
                raise KeyedError(why, ("env", name), show_example=False)
        return self

    @model_validator(mode="after")
    def _ports_differ(self) -> Engine:
        if self.port == self.dist_port:
            why = f"must differ from port (both {self.port}): the API and the rendezvous need a port each"
            raise KeyedError(why, ("distPort",), self.port + 1 if self.port < 65535 else self.port - 1)
        if self.executor == "ray":
            for key, value in (("port", self.port), ("distPort", self.dist_port)):
                if value == RAY_PORT:
                    why = f"{RAY_PORT} is the port of Ray's head with executor ray: pick another"
                    raise KeyedError(why, (key,))
        return self

    @model_validator(mode="before")
    @classmethod
    def _newest_version_of_kind(cls, data: Any) -> Any:
        # The default release is the newest catalogued one of the engine chosen, whichever it is.
        if isinstance(data, dict) and data.get("version") is None:
            kind = data.get("kind", "sglang")
            if isinstance(kind, str) and kind in engine_flags.ENGINE_NAMES:
                data = {**data, "version": engine_flags.newest_version(kind)}
        return data

    @field_validator("version")
    @classmethod
    def _catalogued(cls, v: str, info: ValidationInfo) -> str:
        kind = info.data.get("kind")
        if kind is not None:
            try:
                engine_flags.load_catalog(kind, v)
            except engine_flags.UnknownCatalogError as err:  # it names the known releases
                raise KeyedError(str(err), (), engine_flags.newest_version(kind)) from None
        return v

    @model_validator(mode="after")
    def _flags_accepted(self) -> Engine:
        # The seeds' first relaunch died on a flag the engine's parser refused; refuse it here, before any node.
        problems = engine_flags.check_flags(self.kind, self.version, self.flags, engine_flags.OWNED_FLAGS[self.kind])
        if problems:
            name = f"{engine_flags.ENGINE_NAMES[self.kind]} {self.version}"
            why = f"refused for {name} (the release in spark-llm:engine.version):" + "".join(
                f"\n    {p.message}" for p in problems
            )
            raise KeyedError(why, ("flags",), show_example=False)
        return self

    def flag_warnings(self) -> list[str]:
        """One line per flag this release takes but marks deprecated (`pulumi preview` shows them as warnings)."""
        found = engine_flags.flag_warnings(self.kind, self.version, self.flags)
        return [f"{NAMESPACE}:engine.flags: {w.message}" for w in found]


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
    model: Model
    image: Image
    engine: Engine = Field(default_factory=Engine)
    network: Network = Field(default_factory=Network)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    transfer: Transfer = Field(default_factory=Transfer)
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

    @field_validator("nodes")
    @classmethod
    def _topology(cls, nodes: list[Node]) -> list[Node]:
        return check_topology(nodes)

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
    raw = {k: v for k, v in raw.items() if v != ""}
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
    try:
        return StackConfig.model_validate(dict(raw))
    except ValidationError as err:
        raise ConfigError(format_errors(err)) from None
