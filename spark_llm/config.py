"""The stack's configuration, typed: parsed once from `spark-llm:*` keys into pydantic models.

Every key here is also declared in Pulumi.yaml `config:` (type, description, default); tests check the two
agree. An invalid value raises ConfigError naming the key path (as written in Pulumi.<stack>.yaml) and an
example of a valid value, before any resource is declared, so nothing runs on any node.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from spark_llm import engine_flags

NAMESPACE = "spark-llm"


class ConfigError(ValueError):
    """A stack config value is invalid; the message names the key and shows a valid value."""


# ---------- domain types ----------

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
_HOST_KEY = re.compile(r"^(ssh-ed25519|ecdsa-sha2-nistp256|ssh-rsa) [A-Za-z0-9+/=]{40,}( .*)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _node_name(v: str) -> str:
    if not _NAME.match(v):
        raise ValueError("must be lowercase letters, digits and '-', starting with a letter")
    return v


def _address(v: str) -> str:
    try:
        ipaddress.ip_address(v)
    except ValueError:
        if not re.match(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$", v):
            raise ValueError("must be an IP address or a host name") from None
    return v


def _ip(v: str) -> str:
    ipaddress.ip_address(v)
    return v


def _host_key(v: str) -> str:
    line = v.strip()
    if not _HOST_KEY.match(line):
        raise ValueError("must be an OpenSSH public host key line ('ssh-ed25519 AAAA...')")
    kind, body = line.split()[:2]
    try:
        blob = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not valid base64; copy the line `ssh-keyscan -t ed25519 HOST` prints") from None
    length = int.from_bytes(blob[:4], "big") if len(blob) >= 4 else -1
    if blob[4 : 4 + length].decode(errors="replace") != kind:
        raise ValueError(f"the key data does not hold a {kind} key; copy the line `ssh-keyscan -t ed25519 HOST` prints")
    if not blob[4 + length + 4 :].strip(b"\0"):
        raise ValueError("is the placeholder; pin the node's real key: `ssh-keyscan -t ed25519 HOST` (verify it)")
    return line


def _abs_path(v: str) -> str:
    if not v.startswith("/") or "\n" in v or "'" in v:
        raise ValueError("must be an absolute path without quotes or newlines")
    return v.rstrip("/") or "/"


NodeName = Annotated[str, AfterValidator(_node_name)]
Address = Annotated[str, AfterValidator(_address)]
IpAddress = Annotated[str, AfterValidator(_ip)]
HostKey = Annotated[str, AfterValidator(_host_key)]
AbsPath = Annotated[str, AfterValidator(_abs_path)]
Port = Annotated[int, Field(ge=1, le=65535)]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


# ---------- sections ----------


class Node(_Model):
    """One machine: reached over SSH at `host` (from the operator, or from `via`), on the fabric at `fabricAddress`."""

    name: NodeName = Field(
        description="Node name used in logs, ssh_config and `via`", json_schema_extra={"example": "spark-2"}
    )
    role: Literal["head", "worker"] = Field(
        description="head (rank 0, serves the API) or worker", json_schema_extra={"example": "worker"}
    )
    host: Address = Field(
        description="SSH address: from the operator, or from the `via` node",
        json_schema_extra={"example": "192.168.200.13"},
    )
    port: Port = Field(22, description="SSH port")
    user: str = Field(
        "root",
        min_length=1,
        description="SSH login user (in the docker group)",
        json_schema_extra={"example": "aurora"},
    )
    fabric_address: IpAddress = Field(
        description="Address on the direct node-to-node link", json_schema_extra={"example": "192.168.200.13"}
    )
    host_key: HostKey = Field(
        description="Pinned SSH host key of the node",
        json_schema_extra={"example": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... (ssh-keyscan -t ed25519 HOST)"},
    )
    via: NodeName | None = Field(
        None, description="Node to jump through (the head, for a worker)", json_schema_extra={"example": "spark-1"}
    )
    key_path: str | None = Field(
        None,
        description="SSH private key for this node (default: sshKeyPath)",
        json_schema_extra={"example": "~/.ssh/id_ed25519"},
    )


class Image(_Model):
    """The engine's container image and how it reaches every node."""

    ref: str = Field(
        min_length=1,
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


_REVISION = re.compile(r"^[0-9a-f]{40}$")
_HF_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class ModelSource(_Model):
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
                raise ValueError("kind huggingface needs repo: OWNER/NAME (e.g. Qwen/Qwen3.5-122B-A10B-FP8)")
            if not self.revision or not _REVISION.match(self.revision):
                raise ValueError(
                    "kind huggingface needs revision: the 40-hex commit to pin (a branch name moves under you)"
                )
            if self.path is not None:
                raise ValueError("kind huggingface takes no path (the weights go to model.path)")
        else:
            if not self.path:
                raise ValueError(f"kind {self.kind} needs path: the weights directory")
            if self.repo or self.revision:
                raise ValueError(f"kind {self.kind} takes no repo or revision")
            if self.kind == "head":
                _abs_path(self.path)
            else:
                local = Path(os.path.expanduser(self.path))
                if not local.is_dir():
                    raise ValueError(f"local weights directory {self.path} does not exist on this machine")
        return self


class Model(_Model):
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


class Network(_Model):
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
    mtu: int = Field(
        9000, ge=576, le=9216, description="MTU the fabric is expected to carry", json_schema_extra={"example": 9000}
    )

    @field_validator("fabric_interfaces", "roce_devices")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.match(r"^[A-Za-z0-9_.:-]{1,15}$", name):
                raise ValueError(f"{name!r} is not an interface name")
        return v


class Transfer(_Model):
    """How the weights cross the fabric from the head to the workers (scripts/fanout.py)."""

    streams: int | None = Field(
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


class Timeouts(_Model):
    """How long `pulumi up` waits for each long step before it fails with what it saw."""

    ready_seconds: int = Field(
        900, ge=10, description="Rank 0 answering a one-token completion", json_schema_extra={"example": 1800}
    )
    transfer_seconds: int = Field(
        6 * 3600,
        ge=60,
        description="The weights copy from the head to all workers (scripts/fanout.py)",
        json_schema_extra={"example": 21600},
    )
    startup_grace_seconds: int = Field(
        5, ge=1, le=300, description="A started container must stay up this long", json_schema_extra={"example": 10}
    )


class Engine(_Model):
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
        for key in v:
            if not _ENV_NAME.match(key):
                raise ValueError(f"{key!r} is not a valid environment variable name")
        return v

    @model_validator(mode="after")
    def _ray_is_vllm_only(self) -> Engine:
        if self.kind == "sglang" and self.executor != "native":
            raise ValueError("executor ray is for kind vllm; SGLang runs its own multi-node launch (executor: native)")
        return self

    @model_validator(mode="after")
    def _ports_differ(self) -> Engine:
        if self.port == self.dist_port:
            raise ValueError("port and distPort must differ")
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
        if "kind" in info.data:
            engine_flags.load_catalog(info.data["kind"], v)  # an unknown release names the known ones
        return v

    @model_validator(mode="after")
    def _flags_accepted(self) -> Engine:
        # The seeds' first relaunch died on a flag the engine's parser refused; refuse it here, before any node.
        problems = engine_flags.check_flags(self.kind, self.version, self.flags, engine_flags.OWNED_FLAGS[self.kind])
        if problems:
            name = f"{engine_flags.ENGINE_NAMES[self.kind]} {self.version}"
            raise ValueError(
                f"flags refused for {name} (the release in spark-llm:engine.version):"
                + "".join(f"\n    {p.message}" for p in problems)
            )
        return self


class StackConfig(_Model):
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
        heads = [n for n in nodes if n.role == "head"]
        if len(heads) != 1:
            raise ValueError(f"exactly one node needs role: head (found {len(heads)})")
        names = {n.name for n in nodes}
        if len(names) != len(nodes):
            raise ValueError("node names must be unique")
        seen: dict[tuple[str, str], str] = {}
        for node in nodes:
            for what, value in (("fabricAddress", node.fabric_address), ("host", f"{node.via}>{node.host}")):
                if (what, value) in seen:
                    raise ValueError(f"{node.name} and {seen[(what, value)]} have the same {what}")
                seen[(what, value)] = node.name
            if node.via is not None:
                if node.via not in names:
                    raise ValueError(f"{node.name}: via {node.via!r} is not a node name")
                if node.via == node.name:
                    raise ValueError(f"{node.name}: via cannot name the node itself")
                if next(n for n in nodes if n.name == node.via).via is not None:
                    raise ValueError(f"{node.name}: via {node.via!r} is itself reached through a jump host")
        if len({n.user for n in nodes}) > 1:
            raise ValueError("every node must log in as the same user (the launch script is identical everywhere)")
        return nodes

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


def _key_path(loc: tuple[Any, ...]) -> str:
    out = f"{NAMESPACE}:{loc[0]}" if loc else NAMESPACE
    for part in loc[1:]:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _example_for(loc: tuple[Any, ...]) -> Any:
    """Walk the models along `loc` to the field's declared example, if any."""
    model: Any = StackConfig
    field = None
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        field = fields.get(part)
        if field is None:
            return None
        ann = field.annotation
        inner = getattr(ann, "__args__", None)
        candidates = [ann, *(inner or ())]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    extra = field.json_schema_extra if field is not None else None
    return extra.get("example") if isinstance(extra, dict) else None


def format_errors(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = tuple(e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        line = f"{_key_path(loc)}: {msg}"
        example = _example_for(loc)
        if example is not None:
            line += f" (e.g. {example!r})" if not isinstance(example, str) else f" (e.g. {example})"
        lines.append(line)
    return "invalid stack configuration:\n  " + "\n  ".join(lines)


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
        raise ConfigError(
            f"unknown configuration key(s): {', '.join(NAMESPACE + ':' + k for k in unknown)}; "
            f"known keys: {', '.join(sorted(TOP_LEVEL_KEYS))}"
        )
    try:
        return StackConfig.model_validate(dict(raw))
    except ValidationError as err:
        raise ConfigError(format_errors(err)) from None
