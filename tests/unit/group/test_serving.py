"""What "serving" means (spark_llm.group.serving), and the supervisor asking it as the readiness gate does."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest

from spark_llm.group.serving import COMPLETIONS_PATH, api_key_of, render_api_config, serving_request
from spark_llm.remote import gate_probe
from tests.unit.group.supervisor_program import load

program = load("supervisor_program_serving")


@pytest.mark.parametrize("key", ["sk-1", 'with "quotes" and: colons', "ключ-🔑"])
def test_the_key_file_reads_back_the_key_it_was_written_with(key):
    assert api_key_of(render_api_config(key)) == key
    assert api_key_of("# nothing here\n") is None


class Engine(BaseHTTPRequestHandler):
    """Rank 0 as far as serving goes: 200 for a completion with the right key, 401 without."""

    seen: list[tuple[str, str, dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Engine.seen.append((self.path, self.headers.get("Authorization", ""), body))
        self.send_response(200 if self.headers.get("Authorization") == "Bearer sk-secret" else 401)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_supervisor_asks_the_gates_completion_with_the_key_from_the_engines_key_file(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    key_file = tmp_path / "api-key.yaml"
    key_file.write_text(render_api_config("sk-secret"))
    spec = {
        "members": [],
        "api_host": "127.0.0.1",
        "api_port": server.server_address[1],
        "model": "m",
        "wedge_seconds": 180,
        "state_path": str(tmp_path / "s.json"),
        "deployment": "d",
        "revision": "r",
    }
    try:
        keyed = program.Supervisor({**spec, "api_key_file": str(key_file)})
        assert keyed.api.completion() == 200
        assert program.Supervisor({**spec, "api_key_file": ""}).api.completion() == 401
    finally:
        server.shutdown()
    path, auth, body = Engine.seen[0]
    # The gate's own request: the same path and body (spark_llm.remote.gate_probe builds it from serving_request).
    assert (path, auth, body) == ("/v1/completions", "Bearer sk-secret", serving_request("m"))
    assert json.dumps(serving_request("m")) in gate_probe.probe_script(
        {"model": "m", "address": "127.0.0.1", "port": 1, "api_key": ""}, 10
    )


def test_the_rollback_times_the_first_completion_that_serves_as_the_gate_asks_it():
    """`spark-llm rollback` asks the group's question (spark_llm.group.serving), not a copy of its own."""
    from spark_llm.ops import rollback

    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    Engine.seen.clear()
    try:
        keyed = SimpleNamespace(model_name="m", api_key="sk-secret", endpoint=endpoint)
        assert rollback._first_completion(keyed, time.monotonic() + 10) is not None
        # An answer that is not serving (401: no key) is not the first completion, however often it comes.
        unkeyed = SimpleNamespace(model_name="m", api_key=None, endpoint=endpoint)
        assert rollback._first_completion(unkeyed, time.monotonic() + 1) is None
    finally:
        server.shutdown()
    assert Engine.seen[0] == (COMPLETIONS_PATH, "Bearer sk-secret", serving_request("m"))
    assert len(Engine.seen) > 1 and all(body == serving_request("m") for _, _, body in Engine.seen)
