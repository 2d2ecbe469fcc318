"""`spark-llm smoke`: the SSE stream, the load summary and its percentiles."""

from __future__ import annotations

import pytest

from spark_llm.ops import smoke
from spark_llm.ops.render import render_text


def test_sse_chunks_until_done():
    lines = [b'data: {"choices": [{"delta": {"content": "hi"}}]}\n', b"\n", b": keep-alive\n", b"data: [DONE]\n"]
    lines.append(b'data: {"after": "done"}\n')
    assert list(smoke.parse_sse(lines)) == [{"choices": [{"delta": {"content": "hi"}}]}]


def test_smoke_summary_counts_errors_and_rates():
    results = [
        smoke.RequestResult(True, 200, 0.010, 0.100, 20, "x"),
        smoke.RequestResult(True, 200, 0.030, 0.200, 40, "y"),
        smoke.RequestResult(False, 503, None, 0.005, 0, error="HTTP 503: not ready"),
    ]
    load = smoke.summarize(results, wall_s=0.5, concurrency=2)
    assert (load["requests"], load["ok"], load["errors"]) == (3, 2, 1)
    assert load["ttft_ms"] == {"p50": 10.0, "p95": 30.0, "max": 30.0}
    assert load["tokens_per_s"] == 120.0 and load["tokens_per_s_per_request"] == 200.0
    assert load["error_messages"] == {"HTTP 503: not ready": 1}
    text = render_text(smoke.smoke_table(results[0], load))
    assert "2/3" in text and "1x HTTP 503: not ready" in text


def test_a_failed_first_completion_says_no_load_was_sent_not_errors_0():
    failed = smoke.RequestResult(False, 503, None, 0.005, 0, error="HTTP 503: not ready")
    text = render_text(smoke.smoke_table(failed, smoke.summarize([], wall_s=0.0, concurrency=4)))
    assert "FAILED" in text and "HTTP 503: not ready" in text and "not sent" in text
    assert "errors" not in text and "0/0" not in text


@pytest.mark.parametrize(("q", "value"), [(50, 2), (95, 4), (100, 4), (0, 1)])
def test_percentile_nearest_rank(q, value):
    assert smoke.percentile([4, 1, 3, 2], q) == value
