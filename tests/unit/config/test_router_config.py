"""spark-llm:router: the image pinned (a digest, or a local image's ID), a port of its own on the head, the stack's
API key required; each mistake is one line naming the key and a valid value. Absent (or Pulumi.yaml's default
`{}`): no router, and the config is what it was."""

from __future__ import annotations

from typing import Any

import pytest

from spark_llm.config import ConfigError, parse
from tests.conftest import dual_spark_raw

DIGEST = "sha256:" + "ab" * 32


def with_router(router: dict[str, Any], **engine: Any) -> dict[str, Any]:
    raw = dual_spark_raw()
    raw["apiKey"] = "sk-test"
    raw["router"] = router
    raw["engine"] = {**raw.get("engine", {}), **engine}
    return raw


def refusal(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        parse(raw)
    assert "Traceback" not in str(refused.value)
    return str(refused.value).splitlines()[1:]


@pytest.mark.parametrize(
    "image",
    [f"ghcr.io/you/spark-llm-router@{DIGEST}", f"registry:5000/router:1.13.0@{DIGEST}", DIGEST],
)
def test_an_image_pinned_by_digest_or_an_image_id_is_taken(image: str) -> None:
    cfg = parse(with_router({"image": image}))
    assert cfg.router is not None and cfg.router.image == image and cfg.router.port == 4000


@pytest.mark.parametrize(
    "image", ["lightseekorg/smg:1.13.0", "lightseekorg/smg", "smg@sha256:abc", "sha256:" + "0" * 63]
)
def test_an_image_not_pinned_is_refused_showing_the_digest_form(image: str) -> None:
    (line,) = refusal(with_router({"image": image}))
    assert line.startswith(f"  spark-llm:router.image: {image!r} is not pinned: write it as REPO@sha256:DIGEST")
    assert "(e.g. ghcr.io/example/spark-llm-router@sha256:" in line


@pytest.mark.parametrize(
    ("router_port", "engine", "key", "valid"),
    [
        (30000, {}, "spark-llm:engine.port", 4000),
        (20000, {}, "spark-llm:engine.distPort", 4000),
        (4000, {"port": 4000}, "spark-llm:engine.port", 4001),
        (6379, {"kind": "vllm", "executor": "ray"}, "Ray's head port (spark-llm:engine.executor ray)", 4000),
    ],
)
def test_a_router_port_the_engine_takes_on_the_head_is_refused_naming_both_keys(
    router_port: int, engine: dict[str, Any], key: str, valid: int
) -> None:
    (line,) = refusal(with_router({"image": DIGEST, "port": router_port}, **engine))
    assert line == (
        f"  spark-llm:router.port: {router_port} is also {key} on the head: the router needs a port of its own"
        f" (e.g. {valid})"
    )


def test_a_router_without_the_stacks_api_key_is_refused_naming_apikey() -> None:
    raw = with_router({"image": DIGEST})
    del raw["apiKey"]
    (line,) = refusal(raw)
    assert line == (
        "  spark-llm:apiKey: the router checks the stack's API key: set one with"
        " `pulumi config set --secret apiKey sk-...`"
    )


def test_a_router_without_an_image_is_refused_naming_the_key() -> None:
    (line,) = refusal(with_router({"port": 4000}))
    assert line.startswith("  spark-llm:router.image: required: this key is missing (e.g. ghcr.io/example/")


@pytest.mark.parametrize("absent", [None, {}])
def test_no_router_leaves_the_config_as_it_was(absent: dict | None) -> None:
    raw = dual_spark_raw()
    before = parse(raw)
    if absent is not None:
        raw["router"] = absent  # Pulumi.yaml's default for an unset object key
    assert parse(raw) == before
    assert before.router is None
