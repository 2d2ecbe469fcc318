"""Drift under Pulumi mocks: steps carry the token the nodes recorded, unobserved when no probe ran, and an
observed drift replaces only the drifted node's steps."""

from __future__ import annotations

import pulumi

from tests.unit.graph_mocks import IMAGE_ID, WEIGHTS_DIGEST, dual_spark_stack_file, pinned
from tests.unit.graph_mocks import inputs as _inputs
from tests.unit.graph_mocks import register as _register


def test_unobserved_steps_carry_the_unobserved_token(registered):
    for name in ("spark-image-spark-1", "spark-image-spark-2-verify"):
        assert "unobserved" in _inputs(registered[name])["triggers"], name
    assert "spark-2=unobserved" in _inputs(registered["spark-weights-workers"])["triggers"]
    assert _inputs(registered["spark-image-spark-2-image"])["triggers"]["token"] == "unobserved"


def test_observed_drift_replaces_only_the_drifted_nodes_steps(monkeypatch):
    from spark_llm.remote.observe import NodeObservation

    head_token, worker_token = "tok-head", "tok-worker"
    observations = {
        "spark-1": NodeObservation(
            node="spark-1",
            image=f"{IMAGE_ID} linux/arm64",
            tokens={"image": f"{head_token} {IMAGE_ID}", "weights": f"{head_token} {WEIGHTS_DIGEST}"},
            facts={"weights": WEIGHTS_DIGEST},
        ),
        # The worker's image was removed since the last up; its weights are as they were.
        "spark-2": NodeObservation(
            node="spark-2",
            image="",
            tokens={"image": f"{worker_token} {IMAGE_ID}", "weights": f"{worker_token} {WEIGHTS_DIGEST}"},
            facts={"weights": WEIGHTS_DIGEST},
        ),
    }
    warnings = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warnings.append(msg))
    registered = _register(monkeypatch, pinned(dual_spark_stack_file()), observations=observations)
    assert head_token in _inputs(registered["spark-image-spark-1"])["triggers"]
    assert head_token in _inputs(registered["spark-image-spark-1-verify"])["triggers"]
    repair = [t for t in _inputs(registered["spark-image-spark-2"])["triggers"] if str(t).startswith("repair-")]
    assert len(repair) == 1
    assert _inputs(registered["spark-image-spark-2-image"])["triggers"]["token"] == repair[0]
    assert repair[0] in _inputs(registered["spark-image-spark-2-verify"])["stdin"]  # recorded once repaired
    assert f"spark-2={worker_token}" in _inputs(registered["spark-weights-workers"])["triggers"]
    assert [w for w in warnings if "drift" in w] == [
        f"drift: image on spark-2: gone (was {IMAGE_ID}) (image {dual_spark_stack_file()['image']['ref']});"
        " `pulumi up` repairs it"
    ]
