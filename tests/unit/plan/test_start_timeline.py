"""The head's history of starts: a failed start's record, the starts stall bounds learn from, and what preview and
status say when the configured revision failed to start last time."""

from __future__ import annotations

import json
import subprocess

from spark_llm.plan.start_timeline import (
    LAST_START_SECTION,
    failed_start_warning,
    failure_record,
    last_failure,
    last_start_probe,
    succeeded,
)

OK = {"revision": "aaaa", "profile": "sglang", "at": "2026-12-03T10:00:00+00:00", "nodes": {}}
FAILED = failure_record("bbbb", "sglang", "head (head): engine container is exited (exit code 1)", "2026-12-03T10:05")


def test_stall_bounds_learn_from_successful_starts_only():
    assert succeeded([OK, FAILED, "junk"]) == [OK]  # type: ignore[list-item]


def test_the_probe_prints_the_latest_line_about_the_revision(tmp_path):
    history = tmp_path / "starts.jsonl"
    lines = [OK, FAILED, {**OK, "revision": "cccc"}]
    history.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in lines))
    out = subprocess.run(["bash", "-c", last_start_probe(str(history), "bbbb")], capture_output=True, text=True)
    section, _, line = out.stdout.strip().partition("\t")
    assert section == LAST_START_SECTION and last_failure(line, "bbbb") == FAILED
    none = subprocess.run(["bash", "-c", last_start_probe(str(tmp_path / "none"), "bbbb")], capture_output=True)
    assert none.returncode == 0 and none.stdout == b""


def test_only_a_failed_start_of_the_configured_revision_counts():
    assert last_failure(json.dumps(OK), "aaaa") is None
    assert last_failure(json.dumps(FAILED), "aaaa") is None
    assert last_failure("", "bbbb") is None


def test_the_warning_says_what_runs_and_what_the_next_up_does():
    text = failed_start_warning(FAILED, "aaaa")
    assert text.startswith("revision bbbb (this config) failed to start last time (2026-12-03T10:05: head (head)")
    assert "the nodes run revision aaaa (the one that served before: a rollback)" in text
    assert "`pulumi up` relaunches revision bbbb as it is: fix the config first." in text
    assert "no engine of it serves" in failed_start_warning(FAILED, None)
