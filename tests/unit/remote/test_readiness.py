"""GroupReady's failure message: which node stopped, and which node the error really came from."""

from __future__ import annotations

import pytest

from spark_llm.plan.hosts import SshHost
from spark_llm.remote.gate_failures import Member, exited_message, relayed_from

HOST = SshHost(name="n", host="127.0.0.1", port=22, user="root", key_path="/k", host_key="ssh-ed25519 AAAA")
HEAD = Member("spark-1", "head", HOST, "/opt/spark-llm/launch.sh", "192.168.200.12")
W1 = Member("spark-2", "worker", HOST, "/opt/spark-llm/launch.sh", "192.168.200.13")
W2 = Member("spark-3", "worker", HOST, "/opt/spark-llm/launch.sh", "192.168.200.14")

# What a Ray driver prints when a worker's actor fails (Ray's own prefixes, as vLLM on Ray shows them).
RAY_HEAD_TAIL = """\
(EngineCore_DP0 pid=1) ERROR [core.py:708] EngineCore failed to start.
ray::RayWorkerWrapper.init_torch_distributed() (pid=94, ip=192.168.200.14, actor_id=5fe5)
RuntimeError: NCCL error: unhandled system error
(RayWorkerWrapper pid=94, ip=192.168.200.14) INFO world_size=3 rank=2"""


def test_a_head_that_relays_a_workers_ray_error_names_that_worker():
    assert relayed_from([HEAD, W1, W2], HEAD, RAY_HEAD_TAIL) == [W2]
    tails = {"spark-1": RAY_HEAD_TAIL, "spark-2": "Ray runtime started.", "spark-3": "Ray runtime started."}
    message = exited_message([HEAD, W1, W2], HEAD, "exited 1 abc", tails)
    first, hint = message.splitlines()[:2]
    assert first == "spark-1 (head): engine container is exited 1 abc while the group was starting."
    assert "spark-3 (ip=192.168.200.14)" in hint and "spark-2" not in hint
    # Every node's tail follows, then what to do next.
    assert message.index("---- spark-1 (head)") < message.index("---- spark-2 (worker)") < message.index("---- spark-3")
    assert message.rstrip().endswith("the group restarts in order.")


def test_no_relay_hint_when_the_failed_node_only_logs_itself():
    tails = {"spark-1": "ok", "spark-2": "Traceback ...\nRuntimeError: boom (ip=192.168.200.13)", "spark-3": ""}
    assert relayed_from([HEAD, W1, W2], W1, tails["spark-2"]) == []
    assert "relayed by Ray" not in exited_message([HEAD, W1, W2], W1, "exited 1 x", tails)
    # An address that merely starts with another member's (…12 vs …120) is not that member.
    assert relayed_from([HEAD, W1], W1, "ip=192.168.200.120") == []


CONNECTION = {"name": "head", "host": "h", "port": 22, "user": "u", "key_path": "/k", "host_key": "ssh-ed25519 A"}


def failing_spec(api_key: str) -> dict:
    """The gate's spec of a one-node group at revision `abc` (what the failure path reads of it)."""
    return {
        "members": [
            {"name": "head", "role": "head", "connection": CONNECTION, "script_path": "/s", "fabric_address": ""}
        ],
        "history_path": "/root/spark-llm/history/starts.jsonl",
        "revision": "abc",
        "profile": "vllm",
        "api_key": api_key,
    }


def test_a_failed_start_is_a_line_of_the_heads_history_and_the_error_is_raised_as_it_was(monkeypatch):
    from spark_llm.remote import readiness

    def fails(spec, *, say):
        raise readiness.GroupNotReadyError("head (head): engine container is exited (exit code 1)\n---- logs with sk-1")

    recorded = []
    monkeypatch.setattr(readiness, "watch_start", fails)
    monkeypatch.setattr(readiness, "append_history", lambda ssh, path, entry: recorded.append((ssh.host, path, entry)))
    spec = failing_spec("sk-1")
    try:
        readiness.wait_ready(spec, say=print)
    except readiness.GroupNotReadyError as err:
        assert "sk-1" in str(err)  # the error itself is redacted where it is built, not here
    else:
        raise AssertionError("the failure was swallowed")
    [(head, path, entry)] = recorded
    assert (head, path) == (CONNECTION["host"], "/root/spark-llm/history/starts.jsonl")
    assert entry["revision"] == "abc" and entry["profile"] == "vllm"
    assert entry["failed"] == "head (head): engine container is exited (exit code 1)"


@pytest.mark.parametrize(("last_served", "same"), [("abc", True), ("old", False)])
def test_a_failed_start_says_whether_its_revision_is_the_one_that_served_last(monkeypatch, last_served, same):
    """A failed restart of the revision that served last must not offer a rollback to itself (issue 41, 7)."""
    from spark_llm.remote import readiness

    def fails(spec, *, say):
        raise readiness.GroupNotReadyError("head (head): engine container is exited (exit code 1)")

    monkeypatch.setattr(readiness, "watch_start", fails)
    monkeypatch.setattr(readiness, "append_history", lambda ssh, path, entry: None)
    served = [{"revision": "old", "at": "2026-12-01T00:00:00Z"}, {"revision": last_served, "at": "2026-12-02T00:00Z"}]
    monkeypatch.setattr(readiness, "read_history", lambda ssh, path: served)
    spec = failing_spec("")
    with pytest.raises(readiness.GroupNotReadyError) as err:
        readiness.wait_ready(spec, say=print)
    assert err.value.served_before is same
