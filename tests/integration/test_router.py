"""The router (smg, sim/router) in front of two stand-in engines on this machine's docker, through the official
openai client: one endpoint, one key, every model by name.

User story: a user points the openai client at one base URL with one key and reaches two models by their names,
chat and streaming alike; `models.list()` shows both; a wrong key is refused at the router. A model added to the
running router is served at once, with no restart of the router or of the engine already serving. No sim nodes:
the containers run on the host's docker (bench/router_rig.py), and everything started is removed.
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from bench.router_rig import RouterRig, listed_models, router_rig
from tests.waits import wait_for

pytestmark = pytest.mark.integration

MESSAGES: list = [{"role": "user", "content": "What does the fabric carry?"}]


@pytest.fixture(scope="module")
def rig() -> Iterator[RouterRig]:
    # The router starts with alpha's engine only: beta's is registered by the test, on the running router.
    with router_rig(models_at_start=("alpha",)) as running:
        yield running


def client(rig: RouterRig, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=rig.router_url + "/v1", api_key=key, max_retries=0, timeout=10)


def test_one_endpoint_serves_both_models_by_name_with_one_key(rig: RouterRig) -> None:
    alpha_started = {name: rig.started_at(name) for name in (rig.router_container, rig.engine_containers["alpha"])}
    rig.registrations["beta"] = rig.add_worker("beta")
    try:
        wait_for("the router to list beta too", lambda: listed_models(rig.router_url, rig.key) == ["alpha", "beta"], 30)
    except AssertionError as error:
        raise AssertionError(f"{error}\nthe router's log:\n{rig.router_log()[-6000:]}") from None
    # Nothing was restarted to add a model: the router and alpha's engine are the same containers, started once.
    assert {name: rig.started_at(name) for name in alpha_started} == alpha_started

    routed = client(rig, rig.key)
    assert sorted(model.id for model in routed.models.list()) == ["alpha", "beta"]
    for model in ("alpha", "beta"):
        through_router = routed.chat.completions.create(model=model, messages=MESSAGES, max_tokens=12)
        # Routed by `model`: the answer is the one that model's own engine gives (the stand-in's text is a hash of
        # the served name and the prompt, so another engine would answer differently).
        direct = openai.OpenAI(base_url=rig.engine_urls[model] + "/v1", api_key="unused", max_retries=0, timeout=10)
        from_engine = direct.chat.completions.create(model=model, messages=MESSAGES, max_tokens=12)
        assert through_router.model == model
        assert through_router.choices[0].message.content == from_engine.choices[0].message.content

        # Streaming passes through: several chunks, which put together say what the whole answer says.
        stream = routed.chat.completions.create(model=model, messages=MESSAGES, max_tokens=12, stream=True)
        pieces = [chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices]
        assert len([piece for piece in pieces if piece]) > 1
        assert "".join(pieces) == from_engine.choices[0].message.content


def test_a_wrong_key_is_refused_at_the_router(rig: RouterRig) -> None:
    with pytest.raises(openai.AuthenticationError) as refused:
        client(rig, "sk-not-the-key").chat.completions.create(model="alpha", messages=MESSAGES, max_tokens=4)
    assert refused.value.status_code == 401
