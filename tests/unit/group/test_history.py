"""The head's history of starts: a failed start's record, the starts stall bounds learn from, and what preview and
status say when the configured revision failed to start last time."""

from __future__ import annotations

import json
import subprocess

from spark_llm.group.history import (
    LAST_START_SECTION,
    append_file,
    append_script,
    appended,
    fabric_fallbacks,
    failure_record,
    fallback_sentence,
    last_failure,
    last_start_probe,
    parse_history,
    read_script,
    record_line,
    restart_record,
    succeeded,
)
from spark_llm.plan.start.timeline import failed_start_warning

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


def test_the_one_writer_keeps_the_last_lines_and_the_one_reader_reads_them_back(tmp_path):
    path = str(tmp_path / "history" / "starts.jsonl")
    for n in range(5):
        subprocess.run(["bash", "-c", append_script(path, {**OK, "revision": f"r{n}"}, kept=3)], check=True)
    with open(path, "a") as f:
        f.write("not json\n")  # a torn line is skipped, not an error
    out = subprocess.run(["bash", "-c", read_script(path, kept=4)], capture_output=True, text=True, check=True)
    assert [r["revision"] for r in parse_history(out.stdout)] == ["r2", "r3", "r4"]
    missing = subprocess.run(["bash", "-c", read_script(str(tmp_path / "none"))], capture_output=True, text=True)
    assert missing.returncode == 0 and parse_history(missing.stdout) == []


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


SOCKET_RANK = {
    "transport": "Socket",
    "network": "Socket",
    "devices": [],
    "line": "NET/Socket : Using [0]eth0:172.29.0.11<0>",
    "problem": "NCCL fell back to sockets (NET/IB : No device found., then NET/Socket : Using [0]eth0:172.29.0.11<0>)"
    " instead of RoCE over rocep1s0f1",
}
IB_RANK = {"transport": "IB", "network": "IB", "devices": ["rocep1s0f1"], "line": "NET/IB : Using", "problem": ""}


def test_a_start_that_serves_on_sockets_is_named_by_rank_whoever_made_it():
    """Issue 41, 1: the supervisor's restart onto sockets, and the gate's under `fabricProof: warn`, serve; status
    and preview say which rank, what NCCL chose and what to check (they said `in sync`)."""
    record = {"revision": "r1", "at": "2026-12-07T06:00:00Z", "by": "supervisor",
              "fabric": {"head": IB_RANK, "worker-1": SOCKET_RANK}}  # fmt: skip
    text = "".join(json.dumps(r) + "\n" for r in ({"revision": "r0"}, record))
    found = fabric_fallbacks(text, "r1")
    assert found is not None
    entry, bad = found
    assert [node for node, _ in bad] == ["worker-1"]
    said = fallback_sentence(entry, bad)
    assert said.startswith("worker-1: NCCL fell back to sockets (NET/IB : No device found., then NET/Socket")
    assert "by the supervisor's restart" in said and "Check on worker-1" in said and "`spark-llm restart`" in said
    # Another revision's start, a failed start, or every rank on RoCE: nothing to say.
    assert fabric_fallbacks(text, "r0") is None
    assert fabric_fallbacks(json.dumps({**record, "failed": "x"}), "r1") is None
    assert fabric_fallbacks(json.dumps({**record, "fabric": {"head": IB_RANK}}), "r1") is None


def test_the_supervisors_writer_appends_one_line_and_keeps_the_last_ones():
    text = "".join(json.dumps({"revision": f"r{i}"}) + "\n" for i in range(3))
    out = appended(text, {"revision": "new", "by": "supervisor"}, kept=3)
    assert [r["revision"] for r in parse_history(out)] == ["r1", "r2", "new"]
    assert appended("", {"revision": "a"}) == record_line({"revision": "a"}) + "\n"


def test_the_supervisors_restart_is_a_start_record_of_its_own(tmp_path):
    """A served restart records the weights it served (what `spark-llm rollback` puts back); a failed one why."""
    served = restart_record("r1", "sglang", {"at": "T", "result": "served", "seconds_to_serving": 3.1}, "d" * 64)
    assert served == {"revision": "r1", "profile": "sglang", "at": "T", "by": "supervisor", "gate_seconds": 3.1,
                      "nodes": {}, "weights": "d" * 64}  # fmt: skip
    assert succeeded([served]) == [served]
    failed = restart_record("r1", "sglang", {"at": "T", "result": "failed: worker-1 did not start"})
    assert failed["failed"] == "worker-1 did not start" and failed["by"] == "supervisor"
    assert last_failure(record_line(failed), "r1") == failed
    path = tmp_path / "starts.jsonl"
    append_file(str(path), served)
    append_file(str(path), failed)
    assert parse_history(path.read_text()) == [served, failed]
