"""spark_llm.plan.supervisor: the spec the supervisor reads, its files on the head, and what it did, read back."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.plan import deployment, supervisor, supervisor_key
from spark_llm.plan.steps import build_steps
from spark_llm.plan.supervisor_report import SupervisorReport

TEMPLATE = deployment.LAUNCH_TEMPLATE.read_text()


def plan_of(raw, **supervisor_config):
    raw["supervisor"] = {"enabled": True, **supervisor_config}
    return deployment.build_plan(groups(parse(raw))[0], TEMPLATE)


def test_the_spec_lists_members_head_first_with_their_fabric_address_and_the_budget(raw_config):
    plan = plan_of(raw_config, maxRestarts=2, backoffSeconds=3)
    spec = supervisor.spec(plan, {"spark-1": "aaa", "spark-2": "bbb"})
    assert [(m["name"], m["role"], m["container_id"]) for m in spec["members"]] == [
        ("spark-1", "head", "aaa"),
        ("spark-2", "worker", "bbb"),
    ]
    assert spec["members"][1]["address"] == "192.168.200.13" and spec["members"][1]["user"] == "aurora"
    assert spec["budget"] == {"max_restarts": 2, "window_seconds": 3600, "backoff_seconds": 3}
    assert spec["api_host"] == "127.0.0.1" and spec["api_port"] == plan.port and spec["model"] == plan.model_name
    assert "StrictHostKeyChecking=yes" in spec["ssh_options"]


def test_a_new_group_is_a_new_deployment_for_the_supervisor(raw_config):
    plan = plan_of(raw_config)
    one = supervisor.spec(plan, {"spark-1": "a", "spark-2": "b"})["deployment"]
    assert one == supervisor.spec(plan, {"spark-1": "a", "spark-2": "b"})["deployment"]
    assert one != supervisor.spec(plan, {"spark-1": "a", "spark-2": "c"})["deployment"]


def test_it_mounts_its_own_keys_dir_read_only_and_never_the_fabric_key(raw_config):
    raw_config["network"] = {"fabricKeyPath": "~/.ssh/fabric"}
    plan = plan_of(raw_config)
    mounts = {m.target: m for m in supervisor.mounts(plan)}
    assert mounts[supervisor_key.CONTAINER_KEY_DIR].source == "/home/aurora/spark-llm/supervisor-key"
    assert mounts[supervisor_key.CONTAINER_KEY_DIR].read_only
    assert not mounts[supervisor.DOCKER_SOCKET].read_only
    assert not any("fabric" in m.source or ".ssh" in m.source for m in mounts.values())
    assert supervisor.spec(plan, {})["key_path"] == "/spark-llm-supervisor-key/id_ed25519"
    script = supervisor.files_script(plan, "{}\n", {"supervisor.py": "print()\n"})
    assert "fabric" not in script and "fabricKeyPath" not in script


def test_it_sees_the_heads_weights_record_read_only_through_its_directory(raw_config):
    """The directory, not the file: a step renames a new record over the old one, which a file mount would not see."""
    plan = plan_of(raw_config)
    mounts = {m.target: m for m in supervisor.mounts(plan)}
    records = mounts[supervisor.CONTAINER_RECORDS_DIR]
    assert records.source == "/home/aurora/spark-llm/state" and records.read_only
    assert supervisor.spec(plan, {})["weights_record"] == "/spark-llm-supervisor-records/weights"


def test_it_sees_the_heads_meminfo_read_only_and_judges_memory_as_the_admission_does(raw_config):
    raw_config["engine"] = {"kind": "vllm", "version": "0.16.0", "flags": ["--gpu-memory-utilization", "0.8"]}
    plan = plan_of(raw_config)
    mounts = {m.target: m for m in supervisor.mounts(plan)}
    assert (
        mounts[supervisor.CONTAINER_MEMINFO].source == "/proc/meminfo"
        and mounts[supervisor.CONTAINER_MEMINFO].read_only
    )
    spec = supervisor.spec(plan, {})
    assert spec["meminfo"] == supervisor.CONTAINER_MEMINFO
    assert spec["memory"] == {
        "engine": "vllm",
        "version": "0.16.0",
        "flags": ["--gpu-memory-utilization", "0.8"],
        "container": "spark-llm-engine",
        "ranks": 2,
    }


def test_a_head_alone_mounts_no_key(raw_config):
    raw_config["nodes"] = raw_config["nodes"][:1]
    plan = plan_of(raw_config)
    assert supervisor_key.CONTAINER_KEY_DIR not in {m.target for m in supervisor.mounts(plan)}


def test_the_program_ships_with_the_groups_room_and_runs_on_a_bare_python(tmp_path):
    # What the files step writes beside the program is all it imports: no site-packages (-S), no PYTHONPATH (-E).
    files = supervisor.program_files()
    assert "spark_llm/group/verdict.py" in files and "spark_llm/__init__.py" in files
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    run = subprocess.run([sys.executable, "-E", "-S", str(tmp_path / "supervisor.py")], capture_output=True, text=True)
    assert run.returncode == 2 and run.stderr.startswith("Usage: supervisor.py SPEC.json"), run.stderr


def test_the_known_hosts_pin_each_worker_by_its_fabric_address(raw_config):
    plan = plan_of(raw_config)
    assert supervisor.known_hosts(plan) == f"192.168.200.13 {plan.workers[0].ssh.host_key}\n"


def test_only_the_heads_probe_reads_the_state_and_only_with_the_supervisor(raw_config):
    plan = plan_of(raw_config)
    probes = build_steps(plan).probes
    assert supervisor.state_path(plan.head) in probes["spark-1"]
    assert "supervisor-state" not in probes["spark-2"]
    raw_config["supervisor"] = {"enabled": False}
    off = deployment.build_plan(groups(parse(raw_config))[0], TEMPLATE)
    assert "supervisor-state" not in build_steps(off).probes["spark-1"]


RESTART = {"at": "2026-12-03T10:00:00Z", "reason": "spark-2's engine exited (137)", "result": "served"}


def test_preview_says_how_often_it_restarted_the_group_and_the_last_reason():
    report = SupervisorReport.parse(
        json.dumps({"restarts": [RESTART, {**RESTART, "at": "2026-12-03T11:00:00Z"}], "gave_up": None})
    )
    assert report is not None
    assert report.preview_warning() == (
        "the supervisor restarted the group 2 times, last at 2026-12-03T11:00:00Z: spark-2's engine exited (137)"
        " (served)"
    )


def test_a_supervisor_that_gave_up_says_why_and_that_pulumi_up_restarts_the_group():
    gave_up = {"at": "2026-12-03T12:00:00Z", "reason": "spark-2's engine exited (1) (after 3 restarts in 600 s)"}
    report = SupervisorReport.parse(json.dumps({"restarts": [RESTART], "gave_up": gave_up}))
    assert report is not None
    assert report.preview_warning() == (
        "the supervisor gave up at 2026-12-03T12:00:00Z: spark-2's engine exited (1) (after 3 restarts in 600 s);"
        " `pulumi up` restarts the group"
    )
    assert report.lines()[-1].startswith("the supervisor gave up at 2026-12-03T12:00:00Z: spark-2's engine exited")
    assert "then run `pulumi up`" in report.lines()[-1]


def test_nothing_to_say_when_it_never_restarted_and_an_unreadable_file_is_no_report():
    assert SupervisorReport.parse(json.dumps({"restarts": [], "gave_up": None})).preview_warning() is None
    assert SupervisorReport.parse("{not json") is None


# A stand-in `docker` for the image check: `docker run ... --entrypoint sh IMAGE -c SCRIPT sh ARG` runs SCRIPT with
# only IMAGE's tools on PATH (a directory per image, under $FAKE_IMAGES); an image without sh fails as docker does.
FAKE_DOCKER = """#!/bin/bash
args=("$@"); i=0
while [ "${args[$i]}" != --entrypoint ]; do i=$((i + 1)); done
image=${args[$((i + 2))]//[:\\/]/_}
echo "WARNING: The requested image's platform (linux/arm64) does not match the detected host platform" >&2
if [ ! -e "$FAKE_IMAGES/$image/sh" ]; then
  echo "docker: Error response from daemon: failed to create task: exec: \\"sh\\": executable file not found" >&2
  exit 127
fi
PATH="$FAKE_IMAGES/$image" exec /bin/sh "${@:$((i + 4))}"
"""


def run_image_check(tmp_path, plan, image: str, tools: tuple[str, ...]):
    images = tmp_path / "images"
    folder = images / image.replace(":", "_").replace("/", "_")  # PATH cannot hold a ':'
    folder.mkdir(parents=True)
    for tool in tools:
        exe = folder / tool
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_IMAGES": str(images)}
    script = "set -euo pipefail\n" + supervisor.image_check_script(plan, image)
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)


def test_an_image_with_python3_and_ssh_passes_the_check_whatever_docker_warns(raw_config, tmp_path):
    done = run_image_check(tmp_path, plan_of(raw_config), "sha256:abc", ("sh", "python3", "ssh"))
    assert done.returncode == 0, done.stderr
    assert "python3 and ssh found" in done.stdout


def test_an_engine_image_without_ssh_fails_naming_the_key_the_image_and_a_way_out(raw_config, tmp_path):
    plan = plan_of(raw_config)
    done = run_image_check(tmp_path, plan, "sha256:abc", ("sh", "python3"))
    assert done.returncode != 0
    assert done.stderr.startswith("spark-llm:supervisor.image: the supervisor's image ")
    assert f"{plan.config.image.ref} (the engine image) has no ssh " in done.stderr
    assert "pulumi config set --path supervisor.image" in done.stderr and "supervisor.enabled" in done.stderr
    assert "Nothing on the nodes was stopped." in done.stderr


def test_an_image_of_its_own_without_python3_or_ssh_is_named_as_the_operator_set_it(raw_config, tmp_path):
    plan = plan_of(raw_config, image="registry.example/tiny:1")
    done = run_image_check(tmp_path, plan, "registry.example/tiny:1", ("sh",))
    assert done.returncode != 0
    assert "registry.example/tiny:1 (spark-llm:supervisor.image) has no python3 and ssh " in done.stderr


def test_a_head_alone_needs_no_ssh_in_the_image(raw_config, tmp_path):
    raw_config["nodes"] = raw_config["nodes"][:1]
    done = run_image_check(tmp_path, plan_of(raw_config), "sha256:abc", ("sh", "python3"))
    assert done.returncode == 0, done.stderr
    assert "python3 found" in done.stdout


def test_an_image_without_a_shell_fails_with_dockers_own_words(raw_config, tmp_path):
    done = run_image_check(tmp_path, plan_of(raw_config), "sha256:abc", ())
    assert done.returncode != 0
    assert "could not run a shell in the supervisor's image" in done.stderr
    assert 'exec: "sh": executable file not found' in done.stderr


@pytest.mark.parametrize(
    ("observed", "label", "repaired"),
    [
        (None, "d1", False),  # not looked at (mocks): the files' digest
        ("running d1", "d1", False),  # runs as `up` left it
        ("running d1-repair-0a1b2c3d", "d1-repair-0a1b2c3d", False),  # repaired before: kept, so the next up is a no-op
        ("running d0", "d1", False),  # new files replace it anyway
        ("absent", "d1-repair-", True),  # `docker rm -f`
        ("exited d1", "d1-repair-", True),  # `docker kill`, or a failed up's stop
    ],
)
def test_a_supervisor_found_gone_or_stopped_gets_a_new_label_and_a_repaired_one_keeps_it(observed, label, repaired):
    got = supervisor.container_label("d1", observed, "run-1")
    assert got.startswith(label) and (got != "d1") == (repaired or label != "d1")
    if repaired:  # new at every program run, as every repair token is (spark_llm.plan.drift)
        assert supervisor.container_label("d1", observed, "run-2") != got


def test_preview_warns_of_a_stopped_supervisor_only_once_it_has_run():
    state = '{"restarts": []}'
    assert supervisor.container_warning("absent", state) == (
        "the supervisor's container on the head is absent: `pulumi up` starts it again"
    )
    assert supervisor.container_warning("exited d1", state) is not None
    assert supervisor.container_warning("running d1", state) is None
    assert supervisor.container_warning("absent", None) is None  # a first deployment: nothing ran yet
    assert supervisor.container_warning(None, state) is None


@pytest.mark.parametrize(
    ("kind", "running", "generated"),
    [
        ("sglang", "sglang:num_running_reqs", "sglang:generation_tokens_total"),
        ("vllm", "vllm:num_requests_running", "vllm:generation_tokens_total"),
    ],
)
def test_with_monitoring_it_reads_the_wedge_alerts_signal_in_the_releases_own_names(
    raw_config, kind, running, generated
):
    """The supervisor reads rank 0's metrics by the names the wedge alert reads (the release's catalog); without
    monitoring it has no such reading (SGLang serves none without --enable-metrics)."""
    raw_config["engine"] = {**raw_config.get("engine", {}), "kind": kind}
    assert "tokens" not in supervisor.spec(plan_of(dict(raw_config)), {})
    raw_config["monitoring"] = {"image": "sha256:" + "a" * 64, "nodeExporterImage": "sha256:" + "b" * 64}
    raw_config["monitoringPassword"] = "pw"
    spec = supervisor.spec(plan_of(raw_config), {})
    assert spec["tokens"] == {"path": "/metrics", "running": running, "generated": generated}
