"""spark_llm.plan.drift: which token a step gets from what the node has now, table-tested."""

from __future__ import annotations

import pytest

from spark_llm.plan.drift import UNOBSERVED, first_run, step_token
from spark_llm.plan.observation import NodeObservation

ID = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


def node(tokens: dict[str, str] | None = None, error: str | None = None) -> NodeObservation:
    return NodeObservation(node="worker-1", tokens=tokens or {}, error=error)


@pytest.mark.parametrize(
    ("observation", "live", "token", "why"),
    [
        (None, ID, UNOBSERVED, None),
        (node({"image": f"tok-1 {ID}"}), ID, "tok-1", None),
        (node({"image": f"tok-1 {ID}"}), None, "repair-", f"image on worker-1: gone (was {ID})"),
        (node({"image": f"tok-1 {ID}"}), OTHER, "repair-", f"image on worker-1: now {OTHER}, was {ID}"),
        (node(), ID, "repair-", "image has not run on worker-1 yet"),
        # Unreadable: a repair token, and no per-step warning (components.bootstrap names the node once).
        (node(error="ssh: no route"), ID, "repair-", None),
    ],
)
def test_step_token(observation, live, token, why):
    got, reason = step_token(observation, "image", live)
    assert got.startswith(token) and reason == why
    if token == "repair-":
        assert got != token and got == step_token(observation, "image", live)[0]  # the same repair each run


def test_a_repaired_node_is_a_no_op_next_time():
    token, _ = step_token(node({"image": f"tok-1 {ID}"}), "image", None)
    assert step_token(node({"image": f"{token} {ID}"}), "image", ID) == (token, None)


@pytest.mark.parametrize(
    ("observation", "expected"),
    [(None, False), (node(), True), (node({"image": f"t {ID}"}), False), (node(error="down"), False)],
)
def test_first_run(observation, expected):
    assert first_run(observation, "image") is expected


@pytest.mark.parametrize(
    ("observation", "said"),
    [
        (None, []),
        (node({"image": f"tok-1 {ID}"}), []),
        (node(), [("info", "image has not run on worker-1 yet: first")]),
        (node({"image": f"tok-1 {OTHER}"}), [("warn", f"drift: image on worker-1: now {ID}, was {OTHER}")]),
        (node(error="ssh: no route"), []),
    ],
)
def test_components_say_info_on_a_first_run_and_warn_on_drift(monkeypatch, observation, said):
    import pulumi

    from components.drift_notes import noted_step_token

    lines: list[tuple[str, str]] = []
    monkeypatch.setattr(pulumi.log, "info", lambda m, *a, **k: lines.append(("info", m)))
    monkeypatch.setattr(pulumi.log, "warn", lambda m, *a, **k: lines.append(("warn", m)))
    token = noted_step_token(
        observation, "image", ID, on_first_run=lambda why: f"{why}: first", on_drift=lambda why: f"drift: {why}"
    )
    assert token == step_token(observation, "image", ID)[0] and lines == said
