"""The program's ModelWeights under Pulumi mocks: the head's copy, the workers' fan-out from the head, what
destroy deletes, the upload of a local source, the Hugging Face token; the containers wait for every copy."""

from __future__ import annotations

import json

from components.commands import run_stdin_script
from tests.conftest import dual_spark_raw
from tests.unit.components.program_requests import LOCAL_COMMAND, _connection, _is_secret
from tests.unit.graph_mocks import WEIGHTS_DIGEST, label
from tests.unit.graph_mocks import inputs as _inputs
from tests.unit.graph_mocks import register as _register
from tests.unit.graph_mocks import without_secrets as _without_secrets


def test_containers_wait_for_every_copy_of_the_weights_and_restart_on_their_digest(registered):
    for name in ("spark-engine-spark-1", "spark-engine-spark-2"):
        deps = registered[name].dependencies
        assert any(d.endswith("::spark-weights-spark-1") for d in deps), name
        assert any(d.endswith("::spark-weights-workers") for d in deps), name
        assert label(registered[name], "spark-llm.weights") == WEIGHTS_DIGEST, name


def test_worker_copy_runs_on_the_head_and_follows_the_heads_copy(registered):
    sync = _inputs(registered["spark-weights-workers"])
    connection = _connection(registered["spark-weights-workers"])
    assert connection["host"] == "10.1.230.180" and "proxy" not in connection
    assert sync["triggers"][1:3] == ["spark-weights-spark-1-id", WEIGHTS_DIGEST]
    assert any(d.endswith("::spark-weights-spark-1") for d in registered["spark-weights-workers"].dependencies)
    assert "fanout.py" in sync["stdin"] and '"address": "192.168.200.13"' in sync["stdin"]
    assert "/home/aurora/spark-llm/state" in sync["stdin"]  # records its token on the worker


def test_copies_never_delete_weights_on_destroy_or_replace(registered):
    for name in ("spark-weights-spark-1", "spark-weights-workers"):
        assert not _inputs(registered[name]).get("delete"), name
    for name in ("spark-weights-spark-1-retention", "spark-weights-spark-2-retention"):
        retention = _inputs(registered[name])
        assert not retention.get("delete"), name
        assert "kept on pulumi destroy" in retention["stdin"] or "never deleted" in retention["stdin"], name


def test_purge_on_destroy_deletes_the_workers_copy_but_never_the_heads_source(monkeypatch):
    raw = dual_spark_raw()
    raw["model"]["purgeOnDestroy"] = True
    registered = _register(monkeypatch, raw)
    worker = _inputs(registered["spark-weights-spark-2-retention"])
    assert worker["delete"] == run_stdin_script("SPARK_LLM_PHASE=delete ") and '"$tool" purge' in worker["stdin"]
    # Kind head at model.path: the head's directory is the source itself.
    head = _inputs(registered["spark-weights-spark-1-retention"])
    assert not head.get("delete") and '"$tool" purge' not in head["stdin"]


def test_head_copy_update_reprints_its_digest(registered):
    """A new key is an update; pulumi-command keeps the update's stdout, which the group's digest is read from."""
    update = _inputs(registered["spark-weights-spark-1"])["update"]
    assert ".spark-llm-manifest.json" in update and "spark-llm-manifest " in update


def test_local_source_is_uploaded_from_here_with_its_digest_in_the_triggers(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    raw = dual_spark_raw()
    raw["model"]["source"] = {"kind": "local", "path": str(tmp_path / "model")}
    registered = _register(monkeypatch, raw)
    upload = registered["spark-weights-spark-1"]
    assert upload.type == LOCAL_COMMAND
    inputs = _inputs(upload)
    digest = inputs["triggers"][-2]
    assert len(digest) == 64 and "rsync" in inputs["stdin"] and inputs["triggers"][-1] == "unobserved"
    assert "KnownHostsCommand" in inputs["environment"]["SPARK_LLM_SSH"]
    assert "PRIVATE KEY" not in json.dumps(inputs)
    assert _inputs(registered["spark-weights-workers"])["triggers"][2] == digest
    assert label(registered["spark-engine-spark-2"], "spark-llm.weights") == digest


def test_hf_token_reaches_the_head_as_a_secret_0600_file(monkeypatch):
    raw = dual_spark_raw()
    raw["model"]["source"] = {"kind": "huggingface", "repo": "Qwen/Qwen3.5-122B-A10B-FP8", "revision": "0" * 40}
    raw["hfToken"] = "hf_secretsecret"
    registered = _register(monkeypatch, raw, secrets=("hfToken",))
    token = _inputs(registered["spark-weights-spark-1-hf-token"])
    assert _is_secret(token["stdin"]) and token["delete"].endswith("else rm -f /home/aurora/spark-llm/hf.env; fi")
    obtain = registered["spark-weights-spark-1"]
    assert "hf_secretsecret" not in json.dumps(_inputs(obtain))
    assert any(d.endswith("::spark-weights-spark-1-hf-token") for d in obtain.dependencies)
    for name, request in registered.items():
        assert "hf_secretsecret" not in json.dumps(_without_secrets(_inputs(request))), name
