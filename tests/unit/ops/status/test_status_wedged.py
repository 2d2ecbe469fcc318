"""`spark-llm status` names a wedged group (issue 32, 5): every container up and the head's /health 200, but no
answer to a one-token completion; and a restart the supervisor makes of a wedged group (its record's cause)."""

from __future__ import annotations

import json
import subprocess

import pytest

from spark_llm.ops.status import command as status
from spark_llm.ops.status import read as status_read
from spark_llm.plan.supervisor_report import SupervisorReport
from tests.unit.ops.node_facts import build, node_run, running, statuses, with_revision

STARTED = ("2026-11-30T10:00:05Z", "2026-11-30T10:00:01Z")


def test_the_heads_script_asks_liveness_and_a_one_token_completion_of_the_model(spark_plan):
    script = status_read.node_script(spark_plan, spark_plan.head)
    assert "/health;" in script and "/v1/completions" in script and f"-m {status_read.ANSWER_SECONDS}" in script
    assert json.dumps({"model": spark_plan.model_name, "prompt": "ping", "max_tokens": 1}) in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


@pytest.mark.parametrize(
    ("live", "answer", "wedged", "error"),
    [
        ((0, "200"), (28, "000curl: (28) Operation timed out"), True, "no answer within 10 s"),
        ((0, "200"), (0, "200"), False, ""),
        ((0, "503"), (0, "503"), False, ""),  # loading: its /health is not 200 yet
        ((7, "000"), (7, "000"), False, "nothing listens on the port"),
    ],
    ids=["wedged", "serving", "starting", "down"],
)
def test_the_head_is_wedged_when_it_is_live_and_answers_nothing(live, answer, wedged, error):
    run = node_run("spark-1", running(STARTED[0]), health=(0, "200"), live=live, answer=answer)
    health = status_read.head_health(run, "/health_generate")
    assert health.wedged is wedged and health.answer_error == error


@pytest.mark.parametrize("supervised", [True, False], ids=["supervisor (default)", "supervisor off"])
def test_status_says_wedged_with_what_was_asked_and_what_restarts_it(raw_config, supervised):
    raw_config["supervisor"] = {"enabled": supervised}
    p = with_revision(build(raw_config))
    s = statuses(p, running(STARTED[0]), running(STARTED[1]))
    health = status.Health(None, (p.model_name,), "timed out after 5 s", live=200, answer_error="no answer within 10 s")
    state, sentence = status.verdict(p, s, health)
    assert state == "wedged"
    assert f"answered no one-token completion of {p.model_name} within 10 s (no answer within 10 s)" in sentence
    assert "the head's /health answers 200" in sentence
    if supervised:
        assert "the supervisor restarts the group in order once it answered nothing for supervisor.wedgeSeconds" in (
            sentence
        )
    else:
        assert "`spark-llm restart`" in sentence


def test_a_supervisors_restart_of_a_wedged_group_is_said_as_wedged(spark_plan, status_json):
    p = with_revision(spark_plan)
    nodes = statuses(p, running(STARTED[0]), running(STARTED[1]))
    record = {"at": "2026-12-05T04:00:00Z", "reason": "wedged: rank 0 has answered no ...", "cause": "wedged"}
    report = SupervisorReport.parse(json.dumps({"restarts": [{**record, "result": "in progress"}]}))
    health = status.Health(503, (), live=503, answer=503, supervisor="running")  # the group starts again
    code, out = status_json(p, nodes, health, report)
    assert code == 1 and out["state"] == "wedged", out
    assert out["summary"].startswith("the supervisor found the group wedged: rank 0 has answered no ...")
    assert out["supervisor"]["restarts"][0]["cause"] == "wedged"
