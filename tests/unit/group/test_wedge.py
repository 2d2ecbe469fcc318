"""When is the group wedged (spark_llm.group.wedge): a bound, several probes, and never while it starts."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from spark_llm.group.wedge import (
    MIN_PROBES,
    WEDGED,
    TokenWatch,
    WedgeWatch,
    asked,
    metric_sum,
    probe_seconds,
    unanswered_while_live,
)
from tests.unit.group.supervisor_program import load

BOUND = 30.0


def watch() -> WedgeWatch:
    return WedgeWatch(BOUND, asked("m"))


def test_probes_unanswered_while_live_for_the_bound_are_a_wedge_that_says_since_when_and_what_was_asked():
    w = watch()
    for at in (1000.0, 1015.0, 1030.0):
        w.not_answered(at, counts=True, how="timed out after 10 s")
    reason = w.verdict(1030.0)
    assert reason is not None and reason.startswith("wedged: ")
    assert "since 1970-01-01T00:16:40Z" in reason  # the first unanswered probe, 1000 s after the epoch
    assert "answered no one-token completion of m (POST /v1/completions)" in reason
    assert "the last: timed out after 10 s" in reason
    assert f"bound {BOUND:g} s" in reason


@pytest.mark.parametrize(
    ("probes", "now"),
    [
        ([1000.0, 1001.0, 1002.0], 1002.0),  # three quick probes: the bound has not passed
        ([1000.0, 1040.0], 1040.0),  # the bound passed, but only two probes: one slow answer is not a wedge
    ],
    ids=["within-the-bound", "too-few-probes"],
)
def test_a_slow_answer_is_not_a_wedge(probes, now):
    w = watch()
    for at in probes:
        w.not_answered(at, counts=True, how="timed out after 10 s")
    assert w.verdict(now) is None


def test_an_answer_between_starts_the_count_again():
    w = watch()
    w.not_answered(1000.0, counts=True, how="timed out")
    w.not_answered(1015.0, counts=True, how="timed out")
    w.answered(1020.0)
    w.not_answered(1025.0, counts=True, how="timed out")
    w.not_answered(1040.0, counts=True, how="timed out")
    w.not_answered(1050.0, counts=True, how="timed out")
    assert w.verdict(1050.0) is None  # 25 s since the first unanswered probe after the answer
    assert w.verdict(1056.0) is not None


def test_probes_that_do_not_count_are_not_a_wedge_and_reset_the_count():
    """A start under way (its liveness route not 200 yet: loading): however long it takes."""
    w = watch()
    for at in range(1000, 1300, 10):
        w.not_answered(float(at), counts=False, how="HTTP 503")
    assert w.verdict(1300.0) is None and w.probes == 0
    w.not_answered(1300.0, counts=True, how="timed out")  # loaded: now the bound starts
    assert w.since == 1300.0


def test_a_restart_resets_the_watch():
    w = watch()
    for at in (1000.0, 1015.0, 1030.0):
        w.not_answered(at, counts=True, how="timed out")
    w.reset()
    assert w.verdict(1100.0) is None and w.due(1100.0)


def test_probes_are_spaced_while_rank_0_answers_and_every_poll_while_it_does_not():
    w = watch()
    assert w.due(1000.0)
    w.answered(1000.0)
    assert not w.due(1000.0 + BOUND / MIN_PROBES - 1)
    assert w.due(1000.0 + BOUND / MIN_PROBES)
    w.not_answered(1010.0, counts=True, how="timed out")
    assert w.due(1011.0)


@pytest.mark.parametrize(
    ("liveness", "answer", "wedged"),
    [(200, None, True), (200, 503, True), (200, 200, False), (503, None, False), (None, None, False)],
)
def test_one_reading_is_unanswered_only_while_the_liveness_route_says_200(liveness, answer, wedged):
    assert unanswered_while_live(liveness, answer) is wedged


@pytest.mark.parametrize(("bound", "seconds"), [(6, 2.0), (30, 10.0), (180, 30.0)])
def test_a_probe_waits_a_third_of_the_bound_between_2_and_30_s(bound, seconds):
    assert probe_seconds(bound) == seconds


# ---------- the wedge alert's own signal (monitoring on): requests running, no token generated ----------

EXPOSITION = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0
vllm:generation_tokens_total{engine="1",model_name="m"} 6.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9
"""


def test_a_family_is_summed_over_its_labels_and_an_absent_one_is_none():
    assert metric_sum(EXPOSITION, "vllm:num_requests_running") == 2.0
    assert metric_sum(EXPOSITION, "vllm:generation_tokens_total") == 1240.0  # not its _created
    assert metric_sum(EXPOSITION, "sglang:num_running_reqs") is None
    assert metric_sum("sglang:num_running_reqs 3\n", "sglang:num_running_reqs") == 3.0  # no labels


def test_requests_running_with_the_counter_standing_still_for_the_bound_are_a_wedge():
    w = TokenWatch(BOUND, "vllm:generation_tokens_total")
    w.feed(1000.0, 2, 1234)
    w.feed(1020.0, 2, 1234)
    assert w.verdict(1029.0) is None
    reason = w.verdict(1030.0)
    assert reason is not None and reason.startswith("wedged: 2 requests running at rank 0")
    assert "vllm:generation_tokens_total standing at 1234 for 30 s" in reason and "since 1970-01-01T00:16:40Z" in reason


@pytest.mark.parametrize(
    "then",
    [(2, 1235), (0, 1234), (None, None)],
    ids=["a-token-came", "no-request-runs", "no-metrics"],
)
def test_a_token_an_idle_engine_or_no_reading_is_not_a_wedge_and_starts_the_count_again(then):
    w = TokenWatch(BOUND, "g")
    w.feed(1000.0, 2, 1234)
    w.feed(1025.0, *then)
    assert w.verdict(1040.0) is None  # 40 s after the first reading: counted again from 1025 at most
    w.reset()
    assert w.since is None and w.generated is None


# ---------- the supervisor's probes (scripts/supervisor.py) against an engine on loopback ----------

program = load("supervisor_program_wedge")


class Engine(BaseHTTPRequestHandler):
    """Rank 0: /health answers `live`, a completion `answer` (a wedge: 200 and a completion that fails)."""

    live = 200
    answer = 503
    metrics = ""
    """What /metrics serves ("": 404, as SGLang without --enable-metrics)."""

    def do_GET(self) -> None:
        if self.path == "/metrics" and Engine.metrics:
            body = Engine.metrics.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(Engine.live if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(Engine.answer)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def supervisor(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    spec = {
        "members": [],
        "api_host": "127.0.0.1",
        "api_port": server.server_address[1],
        "api_key_file": "",
        "model": "m",
        "state_path": str(tmp_path / "state.json"),
        "deployment": "d",
        "revision": "r",
        "ready_seconds": 60,
        "wedge_seconds": 0.5,
        "profile": "sglang",
        "history_path": str(tmp_path / "starts.jsonl"),
    }
    yield program.Supervisor(spec)
    server.shutdown()


def _probe_until(supervisor, deadline_s: float = 10) -> str | None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if wedged := supervisor.wedged():
            return wedged
        time.sleep(0.2)
    return None


@pytest.mark.parametrize("live", [200, 503], ids=["health-200", "health-generating-503"])
def test_a_head_that_served_then_answers_nothing_is_wedged_after_several_probes(supervisor, live):
    """Whatever its /health says once the group served: SGLang's /health may generate too, and fail with the rest."""
    Engine.live, Engine.answer = 200, 200
    assert supervisor.wedged() is None
    Engine.live, Engine.answer = live, 503
    reason = _probe_until(supervisor)
    assert reason is not None and supervisor.watch.probes >= MIN_PROBES
    assert "answered no one-token completion of m (POST /v1/completions)" in reason
    assert f"the last: HTTP 503, /health {live}" in reason
    # While it counted, its state said what it waits for.
    assert supervisor.state["waiting"].startswith("rank 0 answers nothing since ")


def test_the_supervisor_does_not_call_a_group_it_never_saw_serve_wedged_within_a_starts_bound(supervisor):
    Engine.live, Engine.answer = 503, 503
    assert _probe_until(supervisor, 3) is None


def test_a_restart_into_a_head_still_loading_is_not_wedged_but_waits_its_starts_bound(supervisor):
    Engine.live, Engine.answer = 503, 503
    supervisor.spec["ready_seconds"] = 3
    supervisor.restart("head's engine container is exited", {})
    result = supervisor.state["restarts"][-1]["result"]
    assert result == "failed: rank 0 did not answer a one-token completion within 3 s", result


def test_a_restart_into_a_wedge_fails_as_wedged_and_is_recorded_with_its_cause(supervisor):
    """Wedged on every start: its restart's wait ends on the wedge, not after timeouts.readySeconds."""
    Engine.live, Engine.answer = 200, 503
    started = time.monotonic()
    supervisor.restart("wedged: ...", {}, WEDGED)
    record = supervisor.state["restarts"][-1]
    assert record["cause"] == WEDGED and record["result"].startswith("failed: wedged: rank 0 has answered no ")
    assert time.monotonic() - started < 30  # not readySeconds (60)
    assert json.loads((Path(supervisor.spec["state_path"])).read_text())["restarts"][-1]["cause"] == WEDGED
    # Its start is a line of the head's history, as `up`'s gate writes one, made by the supervisor (issue 41, 1).
    [line] = Path(supervisor.spec["history_path"]).read_text().splitlines()
    entry = json.loads(line)
    assert entry["by"] == "supervisor" and entry["revision"] == "r" and entry["failed"].startswith("wedged: rank 0")


def test_with_monitoring_a_head_whose_requests_run_and_generate_nothing_is_wedged_by_the_alerts_signal(tmp_path):
    """Rank 0 still answers the probes (a one-token completion comes back), but the requests it runs generate no
    token: the wedge alert's signal, read at rank 0's /metrics, is the supervisor's too."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    spec = {
        "members": [], "api_host": "127.0.0.1", "api_port": server.server_address[1], "api_key_file": "",
        "model": "m", "state_path": str(tmp_path / "state.json"), "deployment": "d", "revision": "r",
        "ready_seconds": 60, "wedge_seconds": 0.5, "profile": "vllm", "history_path": str(tmp_path / "h.jsonl"),
        "tokens": {"path": "/metrics", "running": "vllm:num_requests_running",
                   "generated": "vllm:generation_tokens_total"},
    }  # fmt: skip
    try:
        Engine.live, Engine.answer, Engine.metrics = 200, 200, EXPOSITION
        supervisor = program.Supervisor(spec)
        reason = _probe_until(supervisor)
        assert reason is not None and reason.startswith("wedged: 2 requests running at rank 0"), reason
        # Tokens coming: no wedge, whatever the bound.
        supervisor.tokens.reset()
        for count in range(1300, 1310):
            Engine.metrics = EXPOSITION.replace("1234.0", f"{count}.0")
            assert supervisor.wedged() is None
            time.sleep(0.1)
    finally:
        Engine.metrics = ""
        server.shutdown()
