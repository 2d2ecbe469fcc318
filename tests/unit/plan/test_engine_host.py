"""spark-llm:engine.host bound to loopback: the API answers on the head only, so `spark-llm smoke` from here asks
for a tunnel instead of asking this machine's own loopback."""

from __future__ import annotations

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.ops import cli, smoke
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.plan import deployment as plan
from spark_llm.plan.stack import StackPlan
from tests.unit.graph_mocks import FAKE_PRIVATE_KEY


@pytest.fixture
def loopback_plan(raw_config, tmp_path, monkeypatch):
    key = tmp_path / "id_ed25519"
    key.write_text(FAKE_PRIVATE_KEY)
    key.chmod(0o600)
    raw_config["sshKeyPath"] = str(key)
    raw_config.setdefault("engine", {})["host"] = "127.0.0.1"
    deployment = plan.build_plan(groups(parse(raw_config))[0], plan.LAUNCH_TEMPLATE.read_text())
    monkeypatch.setattr(PulumiCli, "load_stack", lambda self: StackPlan.one(deployment))
    return deployment


def test_smoke_asks_for_a_tunnel_when_the_api_listens_on_the_heads_loopback(loopback_plan, monkeypatch, capfd):
    monkeypatch.setattr(smoke, "chat_request", lambda *args: pytest.fail("smoke asked this machine's loopback"))
    assert cli.main(["smoke", "--stack", "dual-spark"]) == 2
    err = capfd.readouterr().err
    assert err.startswith(
        "spark-llm smoke: spark-llm:engine.host is 127.0.0.1: the API answers on the head only. Open a tunnel"
        " (`ssh -N -L 30000:127.0.0.1:30000 -i "
    )
    assert err.endswith("-p 22 aurora@10.1.230.180`) and run again with --endpoint http://127.0.0.1:30000\n")
    # Pinned as every ssh of ours: the stack's hostKey, never whatever answers at the address.
    assert "StrictHostKeyChecking=yes" in err and "'KnownHostsCommand=/bin/echo " in err


def test_smoke_goes_through_the_tunnel_given_as_endpoint(loopback_plan, monkeypatch):
    asked = []

    def chat_request(endpoint, *args):
        asked.append(endpoint)
        raise KeyboardInterrupt  # stop here: where it asked is the point

    monkeypatch.setattr(smoke, "chat_request", chat_request)
    assert cli.main(["smoke", "--stack", "dual-spark", "--endpoint", "http://127.0.0.1:40000/"]) == 130
    assert asked == ["http://127.0.0.1:40000"]
