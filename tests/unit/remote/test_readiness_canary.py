"""The readiness gate's canary: the fixed completion at temperature 0 asked on the head (real bash and curl
against a loopback server), recorded with the revision and the node set; a canary without an answer costs only
the record."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Iterator

import pytest

from spark_llm.group.canary import CANARY_PROMPT, CanaryRecord
from spark_llm.plan.hosts import SshHost
from spark_llm.remote import canary
from spark_llm.remote.ssh import RemoteError

HEAD = SshHost(name="spark-1", host="127.0.0.1", port=22, user="root", key_path="/k", host_key="ssh-ed25519 AAAA")
KEY = "sk-canary-'quoted' $HOME"


@pytest.fixture
def engine() -> Iterator[dict]:
    """A loopback completion server: answers `reply` (settable) and records each request's body and header."""
    seen: dict = {"reply": " four five six", "code": 200, "bodies": [], "auth": []}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            seen["auth"].append(self.headers.get("Authorization", ""))
            seen["bodies"].append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            payload = json.dumps({"choices": [{"text": seen["reply"]}]}).encode()
            self.send_response(seen["code"])
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seen["port"] = server.server_address[1]
    try:
        yield seen
    finally:
        server.shutdown()


def _locally(_target: SshHost, script: str, *, timeout: float) -> str:
    """run_script as the head would run it, here: real bash."""
    return subprocess.run(["bash", "-s"], input=script, capture_output=True, text=True, timeout=timeout).stdout


def _spec(port: int) -> dict:
    return {"address": "127.0.0.1", "port": port, "model": "m", "api_key": KEY, "revision": "rev-a"}


def test_the_gate_records_the_answer_with_the_revision_and_the_node_set(engine, monkeypatch):
    monkeypatch.setattr(canary, "run_script", _locally)
    said: list[str] = []
    record = canary.gate_canary(_spec(engine["port"]), HEAD, ["spark-1", "spark-2"], said.append)
    parsed = CanaryRecord.from_json(record)
    assert parsed is not None
    assert (parsed.answer, parsed.revision, parsed.nodes, parsed.error) == (
        " four five six",
        "rev-a",
        ("spark-1", "spark-2"),
        "",
    )
    assert parsed.at.endswith("+00:00")
    assert said == ["[spark-1] canary: ' four five six'"]
    # The fixed prompt, greedy; the key as a header through a descriptor, never on curl's command line.
    assert engine["bodies"] == [{"model": "m", "prompt": CANARY_PROMPT, "max_tokens": 8, "temperature": 0}]
    assert engine["auth"] == [f"Bearer {KEY}"]
    assert "-H @<(printf" in canary.canary_script("127.0.0.1", 1, "m", KEY)


def test_the_same_engine_gives_the_same_record_and_a_changed_one_differs(engine, monkeypatch):
    monkeypatch.setattr(canary, "run_script", _locally)
    first = canary.gate_canary(_spec(engine["port"]), HEAD, ["spark-1"], lambda _line: None)
    again = canary.gate_canary(_spec(engine["port"]), HEAD, ["spark-1"], lambda _line: None)
    engine["reply"] = " salted"
    changed = canary.gate_canary(_spec(engine["port"]), HEAD, ["spark-1"], lambda _line: None)
    assert first["answer"] == again["answer"] != changed["answer"]


def test_an_engine_error_is_recorded_not_raised(engine, monkeypatch):
    monkeypatch.setattr(canary, "run_script", _locally)
    engine["code"] = 503
    said: list[str] = []
    record = canary.gate_canary(_spec(engine["port"]), HEAD, ["spark-1"], said.append)
    assert record["answer"] == "" and record["error"].startswith("HTTP 503")
    assert said[0].startswith("[spark-1] canary: HTTP 503")


def test_a_head_that_cannot_be_asked_costs_only_the_record(monkeypatch):
    def refused(_target, _script, *, timeout):
        raise RemoteError("spark-1 (root@127.0.0.1): exit 255: ssh could not connect\nmore")

    monkeypatch.setattr(canary, "run_script", refused)
    record = canary.gate_canary(_spec(1), HEAD, ["spark-1"], lambda _line: None)
    assert record["answer"] == "" and "could not ask: spark-1 (root@127.0.0.1): exit 255" in record["error"]
