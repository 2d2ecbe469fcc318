"""The router's plan: with spark-llm:router the engine's API moves to the head's fabric address (the router reaches it
there, the operator's side does not) unless engine.host was set, the stack's endpoint is the router's, and what
replaces the router (its revision) is apart from what restarts the engine group and from the models it serves."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment as plan
from spark_llm.plan import router, supervisor
from tests.conftest import dual_spark_raw

IMAGE = "sha256:" + "cd" * 32


def raw(**router_keys: Any) -> dict[str, Any]:
    config = dual_spark_raw()
    config["apiKey"] = "sk-test"
    config["router"] = {"image": IMAGE, **router_keys}
    return config


def build(config: dict[str, Any]) -> plan.DeploymentPlan:
    return plan.build_plan(groups(parse(config))[0], plan.LAUNCH_TEMPLATE.read_text())


def test_with_a_router_the_engine_listens_on_the_heads_fabric_address_and_the_endpoint_is_the_routers() -> None:
    deployment = build(raw())
    assert deployment.api_host == "192.168.200.12"  # the head's fabric address
    assert deployment.api_address == "192.168.200.12"  # where the gate, status and the supervisor ask it
    head_argv = deployment.launches["spark-1"].argv
    assert head_argv[head_argv.index("--host") + 1] == "192.168.200.12"
    assert deployment.endpoint == "http://10.1.230.180:4000"  # the head's management address, the router's port


def test_an_engine_host_the_user_set_is_kept_with_a_router() -> None:
    config = raw()
    config["engine"] = {**config.get("engine", {}), "host": "0.0.0.0"}
    deployment = build(config)
    assert deployment.api_host == "0.0.0.0"
    assert router.engine_worker(deployment) == ("Qwen/Qwen3.5-122B-A10B-FP8", "http://127.0.0.1:30000")


def test_without_a_router_the_plan_is_what_it_was() -> None:
    without = build(dual_spark_raw())
    assert without.api_host == "0.0.0.0" and without.endpoint == "http://10.1.230.180:30000"
    assert router.router_plan(parse(dual_spark_raw()), [router.engine_worker(without)]) is None


def test_the_router_plan_registers_the_engine_at_its_fabric_url_and_mounts_its_files_read_only() -> None:
    config = parse(raw(port=4100))
    deployment = plan.build_plan(groups(config)[0], plan.LAUNCH_TEMPLATE.read_text())
    routed = router.router_plan(config, [router.engine_worker(deployment)])
    assert routed is not None
    assert routed.workers == ((deployment.model_name, "http://192.168.200.12:30000"),)
    assert json.loads(routed.workers_file) == [{"model": deployment.model_name, "url": "http://192.168.200.12:30000"}]
    assert routed.workers_path == "/home/aurora/spark-llm/router-workers/workers.json"
    assert routed.key_path == "/home/aurora/spark-llm/router-api-key"
    # The workers file's directory, not the file: a rewritten file (a new inode) shows in the running router.
    assert routed.mounts == (
        ("/home/aurora/spark-llm/router-workers", "/run/spark-llm/router-workers"),
        ("/home/aurora/spark-llm/router-api-key", router.CONTAINER_KEY),
    )
    assert f"SPARK_LLM_ROUTER_WORKERS_FILE={router.CONTAINER_WORKERS_DIR}/workers.json" in routed.env
    assert "--port" in routed.command and "4100" in routed.command
    # The key is never on the command line, only the file it is in.
    assert "sk-test" not in " ".join(routed.command + routed.env) + routed.workers_file + routed.ready_command()
    assert routed.endpoint == "http://10.1.230.180:4100"


@pytest.mark.parametrize(
    ("change", "value"),
    [("port", 4100), ("image", "ghcr.io/you/router@sha256:" + "ef" * 32)],
)
def test_a_router_change_replaces_the_router_and_not_the_engine_group(change: str, value: Any) -> None:
    before, after = parse(raw()), parse(raw(**{change: value}))
    group = [plan.build_plan(groups(c)[0], plan.LAUNCH_TEMPLATE.read_text()) for c in (before, after)]
    assert group[0].group_revision == group[1].group_revision
    assert group[0].launch_script == group[1].launch_script
    plans = [router.router_plan(c, [router.engine_worker(g)]) for c, g in zip((before, after), group, strict=True)]
    assert plans[0] is not None and plans[1] is not None
    assert plans[0].revision != plans[1].revision


A = ("a", "http://192.168.200.12:30000")
B = ("b", "http://192.168.200.12:30001")


@pytest.mark.parametrize(
    ("change", "before", "after"),
    [
        ("a model added", [A], [A, B]),
        ("a model removed", [A, B], [A]),
        ("a model renamed", [A, B], [A, ("b2", B[1])]),
        ("the models reordered", [A, B], [B, A]),
    ],
)
def test_the_models_served_change_the_workers_file_and_never_the_routers_container(
    change: str, before: list[tuple[str, str]], after: list[tuple[str, str]]
) -> None:
    """Issue 40: a new list of models replaced the router's container, and the model that stayed lost its requests
    for seconds; the list is now the file's alone, which the running router follows."""
    config = parse(raw())
    old, new = router.router_plan(config, before), router.router_plan(config, after)
    assert old is not None and new is not None
    assert new.revision == old.revision, change
    assert new.supervisor_spec() == old.supervisor_spec(), change  # the supervisor's copy makes the same container
    assert (new.command, new.env, new.mounts) == (old.command, old.env, old.mounts)
    assert new.workers_file != old.workers_file and new.workers_digest != old.workers_digest


def test_the_router_notices_an_engine_that_went_and_came_back_within_seconds() -> None:
    """smg's defaults (a health check every 60 s, a circuit breaker open for 60 s) served a restarted engine again
    57 s after it answered; the router checks every second and has no circuit breaker."""
    routed = router.router_plan(parse(raw()), [A])
    assert routed is not None
    command = routed.command
    assert command[command.index("--health-check-interval-secs") + 1] == "1"
    assert command[command.index("--health-success-threshold") + 1] == "1"
    assert "--disable-circuit-breaker" in command


def test_the_supervisor_makes_the_router_again_as_pulumi_up_makes_it_and_marks_it_its_own() -> None:
    config = parse(raw())
    deployment = plan.build_plan(groups(config)[0], plan.LAUNCH_TEMPLATE.read_text())
    routed = router.router_plan(config, [router.engine_worker(deployment)])
    assert routed is not None
    spec = routed.supervisor_spec()
    create = spec["create"]
    assert spec["container"] == "spark-llm-router" and create["Image"] == IMAGE
    assert create["Cmd"] == list(routed.command) and create["Env"] == list(routed.env)
    assert create["HostConfig"]["NetworkMode"] == "host"
    assert create["HostConfig"]["Binds"] == [f"{source}:{target}:ro" for source, target in routed.mounts]
    # Its log bounded as `pulumi up`'s is (issue 41, 7: it grew without end).
    assert create["HostConfig"]["LogConfig"] == {"Type": "json-file", "Config": {"max-size": "20m", "max-file": "3"}}
    assert create["Labels"] == {router.LABEL_REVISION: routed.revision, "spark-llm.router.restored": "supervisor"}
    assert "sk-test" not in json.dumps(spec)  # the key stays in its file


def test_a_stack_without_a_router_keeps_the_supervisors_spec_it_had() -> None:
    config = dual_spark_raw()
    config["supervisor"] = {"enabled": True}
    deployment = plan.build_plan(groups(parse(config))[0], plan.LAUNCH_TEMPLATE.read_text())
    ids = {"spark-1": "a", "spark-2": "b"}
    assert "router" not in supervisor.spec(deployment, ids)


FAKE_DOCKER = r"""#!/bin/bash
# A docker that knows three routers by ID, each with its labels; `rm -f ID` is recorded.
case "$1" in
  ps) printf '%s\n' mine other restored ;;
  inspect)
    case "$4" in
      mine) echo "state-1|" ;;
      other) echo "state-0|" ;;
      restored) echo "|supervisor" ;;
    esac ;;
  rm) echo "$3" >> "$REMOVED" ;;
esac
"""


def test_the_clear_step_removes_another_states_router_and_the_supervisors_copy_and_keeps_its_own(tmp_path) -> None:
    """A state lost and made again (or another checkout's) left a router holding the name: this state's `pulumi up`
    would fail on it forever; the clear step removes it, as the supervisor's copy, and leaves this state's own."""
    import os
    import subprocess

    config = parse(raw())
    routed = router.router_plan(config, [router.engine_worker(build(raw()))])
    assert routed is not None
    (tmp_path / "docker").write_text(FAKE_DOCKER)
    (tmp_path / "docker").chmod(0o755)
    removed = tmp_path / "removed"
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "REMOVED": str(removed)}
    out = subprocess.run(
        ["bash", "-c", routed.clear_command("state-1")], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert removed.read_text().split() == ["other", "restored"]
    assert "removed router other: made by another state (owner state-0)" in out
    assert "removed router restored: made by the supervisor" in out
