"""The `engine` section: which engine, its release, its flags (checked against that release's catalog)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from spark_llm.config import engine_flags
from spark_llm.config.base import (
    NAMESPACE,
    ConfigModel,
    KeyedError,
    Port,
    SeveralKeyedError,
)
from spark_llm.config.nodes import ListenIp, NodeName
from spark_llm.group.memory import ENGINE_CONTAINERS

# Ray's head port with executor ray, and Ray's token authentication settings: spark-llm's alone
# (spark-llm:engine.ports and engine.env may not take them; spark_llm.plan.engines.vllm uses them).
RAY_PORT = 6379
RAY_AUTH_ENV = frozenset({"RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"})

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
        ENGINE_CONTAINERS,
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
                    " reads the stack's own token from its 0600 file (docs/security.md, Ray); remove this key"
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

    @field_validator("flags")
    @classmethod
    def _flags_on_one_line(cls, v: list[str]) -> list[str]:
        # A newline inside a flag's value splits the engine's command line in the launch script: the engine then
        # starts with half a flag and the rest runs as a command (issue 41, 7).
        mistakes = [
            KeyedError(
                f"{flag!r} holds a control character (a newline, a tab): each flag or value is one word of the"
                " engine's command line",
                (i,),
                flag.split()[0] if flag.split() else "--mem-fraction-static",
            )
            for i, flag in enumerate(v)
            if any(ord(c) < 0x20 or ord(c) == 0x7F for c in flag)
        ]
        if mistakes:
            raise SeveralKeyedError(mistakes)
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


def ports_on_head(engine: Engine, engine_key: str) -> list[tuple[str, int]]:
    """The ports an engine takes on the head, each with the key (or the reason) that takes it: its API, its
    rendezvous, and Ray's head with executor ray. What the router's and Prometheus's ports must differ from."""
    taken = [(f"{engine_key}.port", engine.port), (f"{engine_key}.distPort", engine.dist_port)]
    if engine.executor == "ray":
        taken.append((f"Ray's head port ({engine_key}.executor ray)", RAY_PORT))
    return taken
