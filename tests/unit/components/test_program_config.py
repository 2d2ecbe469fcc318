"""The program's one config read (components.bootstrap.load, run by __main__.py) under Pulumi mocks: what preview shows.

A deprecated engine flag is a warning and the deployment goes on; a bad value stops the program with the
key named and what to do, as stack.Refusal (Pulumi prints its message alone: no traceback, no "unhandled
error"), before any resource.
"""

from __future__ import annotations

import pulumi
import pytest

from components import bootstrap as stack
from tests.unit.graph_mocks import dual_spark_stack_file, pinned
from tests.unit.graph_mocks import register as _register


@pytest.fixture
def warnings(monkeypatch) -> list[str]:
    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: said.append(msg))
    return said


def _stack(**engine: object) -> dict:
    raw = pinned(dual_spark_stack_file())
    raw["engine"] = {**raw["engine"], **engine}
    return raw


def test_a_deprecated_flag_warns_in_preview_and_deploys(monkeypatch, warnings):
    # vLLM 0.33.0 (the dual-spark stack's release) marks --log-config-file deprecated.
    registered = _register(monkeypatch, _stack(flags=["--log-config-file", "/etc/vllm-log.json"]))
    assert [w for w in warnings if "spark-llm:engine.flags" in w] == [
        "spark-llm:engine.flags: `--log-config-file` is deprecated in vLLM 0.33.0: it still works, but a later"
        " release may refuse it; plan to remove it"
    ]
    assert "spark-engine-spark-1" in registered  # the engine group is still declared


def test_flags_in_good_standing_warn_nothing(monkeypatch, warnings):
    _register(monkeypatch, _stack(flags=["--max-num-seqs", "8"]))
    assert not [w for w in warnings if "spark-llm:engine.flags" in w]


def test_a_bad_value_stops_the_program_naming_the_key_and_what_to_do(monkeypatch, warnings):
    raw = pinned(dual_spark_stack_file())
    raw["nodes"][1]["via"] = raw["nodes"][1]["name"]
    with pytest.raises(stack.Refusal) as err:
        _register(monkeypatch, raw)
    # The exit code Pulumi's language host reads as "message already shown": no "unhandled error" under it.
    assert err.value.code == 32
    message = str(err.value)
    assert "spark-llm:nodes[1].via: spark-2 cannot be reached through itself" in message
    assert "Nothing was run on any node. Fix the key in Pulumi.dual-spark.yaml" in message


def test_no_api_key_warns_that_the_endpoint_is_open_and_what_to_do(monkeypatch, warnings):
    _register(monkeypatch, _stack())
    opened = [w for w in warnings if "spark-llm:apiKey" in w]
    assert opened == [
        "spark-llm:apiKey is not set: the API on spark-1 listens on 0.0.0.0:30000 (every address of the head) and"
        " answers anyone who reaches it. Set a key as a secret (`pulumi config set --secret spark-llm:apiKey"
        " sk-...`: clients then send `Authorization: Bearer`), or bind the API to one address of the head"
        " (`pulumi config set --path spark-llm:engine.host 127.0.0.1`: then reached through an ssh tunnel only)."
    ]


def test_the_open_endpoint_warning_names_the_one_address_it_listens_on(monkeypatch, warnings):
    _register(monkeypatch, _stack(host="10.1.230.180"))
    assert [w for w in warnings if "listens on 10.1.230.180:30000 (that address)" in w]


def test_an_api_key_silences_the_open_endpoint_warning(monkeypatch, warnings):
    raw = _stack()
    raw["apiKey"] = "sk-unit"
    _register(monkeypatch, raw, secrets=("apiKey",))
    assert not [w for w in warnings if "spark-llm:apiKey" in w]
