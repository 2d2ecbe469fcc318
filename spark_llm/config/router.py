"""The `router` section: one OpenAI-compatible endpoint on the head in front of the stack's engines (smg, the Shepherd
Model Gateway: docs/engines.md, "The router"). Absent: no router, and the engine's API is the endpoint as before."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from spark_llm.config.base import NAMESPACE, ConfigModel, KeyedError, Port
from spark_llm.config.engine import Engine, ports_on_head

_DIGEST = r"sha256:[0-9a-f]{64}"
_PINNED = re.compile(rf"^[a-z0-9][a-z0-9._/:-]*@{_DIGEST}$")
_IMAGE_ID = re.compile(rf"^{_DIGEST}$")
# smg's Prometheus metrics listen on 0.0.0.0:29000 unless told: the plan puts them on the head's loopback only.
METRICS_PORT = 29000
EXAMPLE_IMAGE = "ghcr.io/example/spark-llm-router@sha256:" + "0" * 64


def _pinned_image(v: str) -> str:
    """A reference pinned by digest (`REPO@sha256:...`), or a local image's ID (`sha256:...`): both name one image
    for good. A tag can be moved to another image, and the router on the head would change with no `pulumi up`."""
    if _PINNED.match(v) or _IMAGE_ID.match(v):
        return v
    raise ValueError(
        f"{v!r} is not pinned: write it as REPO@sha256:DIGEST (`docker inspect --format '{{{{index .RepoDigests 0}}}}'"
        " IMAGE` prints it), or a local image's ID sha256:... (`docker image inspect --format '{{.Id}}' IMAGE`)"
    )


PinnedImage = Annotated[str, AfterValidator(_pinned_image)]


class Router(ConfigModel):
    """The router on the head: one endpoint and one API key for the stack's models; the engines answer it alone."""

    image: PinnedImage = Field(
        description="The router's image (sim/router's recipe), pinned: REPO@sha256:DIGEST, or a local image's ID",
        json_schema_extra={"example": EXAMPLE_IMAGE},
    )
    port: Port = Field(
        4000,
        description="The router's port on every address of the head: the stack's endpoint",
        json_schema_extra={"example": 4000},
    )


def check_router_port(router: Router, engine: Engine, engine_key: str = f"{NAMESPACE}:engine") -> KeyedError | None:
    """The router's port against the ports the engine takes on the head (its API, its rendezvous, Ray's head)."""
    taken = ports_on_head(engine, engine_key)
    used = {port for _, port in taken}
    for key, port in taken:
        if router.port == port:
            free = next(p for p in range(4000, 65536) if p not in used)
            why = f"{port} is also {key} on the head: the router needs a port of its own"
            return KeyedError(why, ("port",), free)
    return None
