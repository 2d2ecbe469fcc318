"""`spark-llm logs`: lines interleaved by timestamp across nodes, and when --follow prints a line."""

from __future__ import annotations

from spark_llm.ops import logs


def test_log_lines_interleave_by_timestamp_across_nodes():
    head = [logs.parse_line("head", "2026-11-30T11:00:22.5Z a"), logs.parse_line("head", "2026-11-30T11:00:23Z c")]
    worker = [logs.parse_line("worker-1", "2026-11-30T11:00:22.991246157Z b")]
    merged = logs.interleave({"head": head, "worker-1": worker})
    assert [(line.node, line.text) for line in merged] == [("head", "a"), ("worker-1", "b"), ("head", "c")]
    assert logs.format_line(merged[1], 8) == "worker-1 2026-11-30T11:00:22.991246Z b"


def test_equal_times_keep_node_order_and_lines_without_a_time_come_first():
    merged = logs.interleave(
        {
            "head": [logs.parse_line("head", "2026-11-30T11:00:22Z x")],
            "worker-1": [
                logs.parse_line("worker-1", "Error: No such container"),
                logs.parse_line("worker-1", "2026-11-30T11:00:22Z y"),
            ],
        }
    )
    assert [line.text for line in merged] == ["Error: No such container", "x", "y"]


def test_follow_prints_a_line_once_every_other_live_node_has_caught_up_or_it_waited():
    old = logs.parse_line("head", "2026-11-30T11:00:30Z late head line")
    older = logs.parse_line("worker-1", "2026-11-30T11:00:24Z worker line")
    ripe, held = logs.split_ripe([(10.0, old)], {"head": old.time_ns}, set(), ["head", "worker-1"], now=10.1)
    assert ripe == [] and held == [(10.0, old)]
    latest = {"head": old.time_ns, "worker-1": older.time_ns}
    ripe, held = logs.split_ripe([(10.0, old), (10.1, older)], latest, set(), ["head", "worker-1"], now=10.2)
    assert ripe == [older] and held == [(10.0, old)]
    ripe, _ = logs.split_ripe(held, latest, set(), ["head", "worker-1"], now=10.0 + logs.HOLD_SECONDS)
    assert ripe == [old]
