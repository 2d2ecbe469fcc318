"""The readiness gate's probe (spark_llm.remote.gate_probe): what one probe reads on the head, and when a start that
says it is up, or answered once, and then answers nothing is a failed start named `wedged` (issue 41, 4)."""

from __future__ import annotations

import http.server
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from spark_llm.remote import gate_probe
from spark_llm.remote.gate_probe import Probe, note, parse_probe, probe_script, wedge_watch
from spark_llm.remote.readiness import redact

BOUND = 12.0
CONNECTION = {"name": "head", "host": "h", "port": 22, "user": "u", "key_path": "/k", "host_key": "ssh-ed25519 A"}


def spec(**more) -> dict:
    return {
        "members": [
            {"name": "head", "role": "head", "connection": CONNECTION, "script_path": "/s", "fabric_address": ""}
        ],
        "model": "m",
        "address": "127.0.0.1",
        "port": 1,
        "api_key": "",
        "container": "spark-llm-engine",
        "wedge_seconds": BOUND,
        **more,
    }


class Engine(http.server.BaseHTTPRequestHandler):
    """/health answers 200; a completion answers 200 unless `hang` is set (then it never does: a wedge)."""

    hang = threading.Event()
    seen: dict[str, str] = {}

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.end_headers()

    def do_POST(self):  # noqa: N802
        Engine.seen["auth"] = self.headers.get("Authorization", "")
        self.rfile.read(int(self.headers["Content-Length"]))
        if Engine.hang.is_set():
            time.sleep(5)
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def engine() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Engine.hang.clear()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()


def run_probe(script: str, seconds: float) -> Probe:
    sent = time.time()
    return parse_probe(
        subprocess.run(["bash", "-s"], input=script, capture_output=True, text=True).stdout, sent, seconds
    )


def test_the_probe_sends_the_key_through_a_descriptor_and_reads_the_answer_and_the_liveness_route(engine):
    key = "sk-probe-'quoted' $HOME"
    script = probe_script(spec(port=engine, api_key=key), 10)
    # The key is data inside the script (sent over ssh's stdin), passed to curl by a builtin, never as argv.
    assert "-H @<(printf" in script
    probe = run_probe(script, 10)
    assert probe.answered and probe.live == 200 and Engine.seen["auth"] == f"Bearer {key}"
    assert redact(f"server_args=... api_key='{key}'", key) == "server_args=... api_key='[spark-llm:apiKey]'"


def test_a_hung_completion_is_no_answer_within_the_probes_time_while_the_liveness_route_says_up(engine):
    Engine.hang.set()
    probe = run_probe(probe_script(spec(port=engine), 1), 1)
    assert not probe.answered and probe.code is None and probe.live == 200
    assert probe.how() == "no answer within 1 s, /health 200"


def test_no_engine_at_all_reads_as_no_answer_and_no_liveness():
    probe = parse_probe("LIVE000\ncurl: (7) Failed to connect HTTP000", 0.0, 10)
    assert (probe.code, probe.live, probe.answered) == (None, None, False)


def unanswered(at: float, live: int | None) -> Probe:
    return Probe(at, "curl: (28) Operation timed out HTTP000", live, 4)


def test_a_start_still_loading_is_never_a_wedge_but_one_up_by_its_liveness_route_is_after_the_bound():
    watch = wedge_watch(spec())
    start = time.time() - 100
    # Loading: /health not up yet (vLLM's API server starts after the weights): however long, no wedge.
    assert all(note(watch, unanswered(start + i * 5, 503), answered_before=False) is None for i in range(10))
    # Up by /health and answering nothing: three probes spanning the bound make a wedge.
    assert note(watch, unanswered(start + 60, 200), answered_before=False) is None
    assert note(watch, unanswered(start + 66, 200), answered_before=False) is None
    why = note(watch, unanswered(start + 73, 200), answered_before=False)
    assert why and why.startswith("wedged: rank 0 has answered no one-token completion of m") and "/health 200" in why


def test_after_its_first_answer_every_unanswered_probe_counts_and_an_answer_starts_the_count_again():
    watch = wedge_watch(spec())
    start = time.time() - 100
    # SGLang's /health generates too: a wedged engine's liveness route hangs with the rest, and still it counts.
    assert note(watch, unanswered(start, None), answered_before=True) is None
    assert note(watch, unanswered(start + 6, None), answered_before=True) is None
    assert note(watch, Probe(start + 10, "{} HTTP200", 200, 4), answered_before=True) is None  # answered: reset
    assert note(watch, unanswered(start + 20, None), answered_before=True) is None
    assert note(watch, unanswered(start + 26, None), answered_before=True) is None
    assert note(watch, unanswered(start + 33, None), answered_before=True)


def test_a_spec_from_before_the_gate_watched_for_wedges_never_finds_one():
    old = spec()
    del old["wedge_seconds"]
    assert wedge_watch(old) is None and note(None, unanswered(0, 200), answered_before=True) is None
    assert gate_probe.answer_seconds(old) == gate_probe.ANSWER_SECONDS
    assert gate_probe.canary_seconds(spec()) == 4 and gate_probe.canary_seconds(old) == 30
