"""scripts/supervisor_allow.sh: what the supervisor's key may run on a worker (sshd's forced command for that key).

Run as sshd runs it, with $SSH_ORIGINAL_COMMAND set and a stand-in `docker` on PATH that records its argv: an
allowed request reaches docker as exactly its words, anything else never reaches it and exits 126 with one line.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from spark_llm.group.fabric_ready import FABRIC_REQUEST, NOT_READ, fields_from, read_sysfs
from spark_llm.group.logs import logs_command
from spark_llm.group.memory import MEMORY_REQUEST
from spark_llm.group.weights import RECORD_REQUEST
from tests.unit.group.test_fabric_hold import IFACE, fake_sysfs

ALLOW = Path(__file__).resolve().parents[3] / "scripts" / "supervisor_allow.sh"
MEMORY_PROBE = ALLOW.parent / "lib" / "memory.sh"
FABRIC_RECORD = ALLOW.parent / "lib" / "host_record.sh"
ENGINE = "spark-llm-engine"
# Records its argv, one word a line (a word with a newline in it would show as two), and says which stream is which.
FAKE_DOCKER = """#!/bin/bash
printf '%s\\n' "$@" > "$DOCKER_ARGV"
echo "docker's stdout"
echo "docker's stderr" >&2
"""


def allow(
    tmp_path: Path, request: str | None, container: str = ENGINE, script: Path = ALLOW, **env_extra: str
) -> tuple[subprocess.CompletedProcess, list]:
    """The script run for `request` (None: a login shell, no SSH_ORIGINAL_COMMAND); docker's argv, or None when it
    was not run. `script`: where the script is (its weights record is found beside it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    argv = tmp_path / "argv"
    argv.unlink(missing_ok=True)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "DOCKER_ARGV": str(argv), **env_extra}
    if request is not None:
        env["SSH_ORIGINAL_COMMAND"] = request
    run = subprocess.run(["bash", str(script), container], env=env, capture_output=True, text=True, timeout=30)
    return run, argv.read_text().splitlines() if argv.exists() else None


# What scripts/supervisor.py sends a worker today (Node.read, Node.act, Node.logs), built as it builds them.
SUPERVISOR_REQUESTS = [
    (shlex.join(["docker", "inspect", ENGINE]), ["inspect", ENGINE]),
    (shlex.join(["docker", "start", ENGINE]), ["start", ENGINE]),
    (shlex.join(["docker", "stop", "-t", "10", ENGINE]), ["stop", "-t", "10", ENGINE]),
    (logs_command(ENGINE, tail=5), ["logs", "--tail", "5", ENGINE]),
    # The lines of one start only (a restart's fabric proof: Node.log_text).
    (logs_command(ENGINE, tail=4000, since="1796620000"), ["logs", "--since", "1796620000", "--tail", "4000", ENGINE]),
]


@pytest.mark.parametrize(("request_line", "argv"), SUPERVISOR_REQUESTS)
def test_each_request_of_the_supervisor_reaches_docker_as_exactly_its_words(tmp_path, request_line, argv):
    run, seen = allow(tmp_path, request_line)
    assert run.returncode == 0, run.stderr
    assert seen == argv


@pytest.mark.parametrize(
    ("request_line", "argv"),
    [
        (f"docker stop {ENGINE}", ["stop", ENGINE]),
        (f"docker logs {ENGINE}", ["logs", ENGINE]),
        (f"docker logs --tail 50 {ENGINE} 2>&1", ["logs", "--tail", "50", ENGINE]),
        # Blanks between words are not words.
        (f"  docker   inspect  {ENGINE} ", ["inspect", ENGINE]),
    ],
)
def test_the_allowed_forms_without_their_options(tmp_path, request_line, argv):
    run, seen = allow(tmp_path, request_line)
    assert run.returncode == 0, run.stderr
    assert seen == argv


def test_logs_merges_the_engines_stderr_only_when_asked_to(tmp_path):
    merged, _ = allow(tmp_path, logs_command(ENGINE, tail=5))
    assert merged.stdout.split("\n")[:2] == ["docker's stdout", "docker's stderr"] and merged.stderr == ""
    apart, _ = allow(tmp_path, f"docker logs --tail 5 {ENGINE}")
    assert apart.stdout == "docker's stdout\n" and apart.stderr == "docker's stderr\n"


REFUSED = [
    None,  # `ssh worker`: a login shell
    "",
    "id",
    "bash",
    "sh -c id",
    "docker",
    "docker ps",
    f"docker run --rm -v /:/host {ENGINE}",
    "docker run --rm alpine id",
    f"docker exec {ENGINE} id",
    f"docker exec -it {ENGINE} sh",
    f"docker rm -f {ENGINE}",
    f"docker kill {ENGINE}",
    f"docker cp {ENGINE}:/etc/shadow -",
    "docker inspect spark-llm-supervisor",
    "docker inspect",
    f"docker inspect {ENGINE} spark-llm-supervisor",
    f"docker inspect {ENGINE}x",
    f"docker inspect -f {{{{.Config.Env}}}} {ENGINE}",
    f"docker inspect '{ENGINE}'",
    f'docker inspect "{ENGINE}"',
    f"docker inspect {ENGINE}; id",
    f"docker inspect {ENGINE} ; id",
    f"docker inspect {ENGINE} && id",
    f"docker inspect {ENGINE} || id",
    f"docker inspect {ENGINE} | sh",
    f"docker inspect $(id) {ENGINE}",
    f"docker inspect {ENGINE} $(id)",
    f"docker inspect `id` {ENGINE}",
    "docker inspect spark-llm-*",
    f"docker inspect {ENGINE}\nid",
    f"docker inspect\t{ENGINE}",
    f"docker start {ENGINE} > /tmp/x",
    f"docker stop -t {ENGINE}",
    f"docker stop -t ten {ENGINE}",
    f"docker stop -t 10 {ENGINE} other",
    f"docker stop --time 10 {ENGINE}",
    f"docker stop -s KILL {ENGINE}",
    f"docker logs --tail 5 {ENGINE} 2>&1 ; id",
    f"docker logs --tail 5 {ENGINE} 2>/tmp/x",
    f"docker logs --follow {ENGINE}",
    f"docker logs --since 2026-12-07T06:00:00Z {ENGINE}",
    f"docker logs --since -1 {ENGINE}",
    f"docker logs --tail 5 --since 1796620000 {ENGINE}",
    f"docker logs --tail {ENGINE}",
    "docker logs --tail 5 other 2>&1",
    f"DOCKER_HOST=tcp://x docker inspect {ENGINE}",
    f"/usr/bin/docker inspect {ENGINE}",
    f"docker --host tcp://x inspect {ENGINE}",
    f"sudo docker inspect {ENGINE}",
    # The weights record's request, word for word or not at all: no path, no other record, no redirection.
    "spark-llm",
    "spark-llm weights-record x",
    "spark-llm weights-record /etc/shadow",
    "spark-llm weights-record ../state/supervisor-key",
    "spark-llm weights-record > /tmp/x",
    "spark-llm weights-record; id",
    "spark-llm weights-record && id",
    "spark-llm weights-record\nid",
    "spark-llm weights-record $(id)",
    "spark-llm weights",
    "spark-llm weights-records",
    "spark-llm image-record",
    "'spark-llm' weights-record",
    "spark-llm 'weights-record'",
    "/usr/bin/spark-llm weights-record",
    f"docker weights-record {ENGINE}",
    "cat state/weights",
    "cat ~/spark-llm/state/weights",
]


@pytest.mark.parametrize("request_line", REFUSED)
def test_anything_else_is_refused_with_one_line_and_126_and_never_reaches_docker(tmp_path, request_line):
    run, seen = allow(tmp_path, request_line)
    assert run.returncode == 126
    assert seen is None
    assert run.stdout == ""
    assert run.stderr.startswith("spark-llm: the supervisor's key may only run docker inspect|start|stop|logs on")
    assert run.stderr.count("\n") == 1, run.stderr


def test_the_allowed_container_is_the_one_sshd_names(tmp_path):
    """spark-llm:engine.containerName: the forced command passes the engine's name; the default's is then refused."""
    run, seen = allow(tmp_path, "docker inspect my-engine", container="my-engine")
    assert run.returncode == 0 and seen == ["inspect", "my-engine"]
    run, seen = allow(tmp_path, f"docker inspect {ENGINE}", container="my-engine")
    assert run.returncode == 126 and seen is None


def test_without_the_container_it_prints_usage(tmp_path):
    run = subprocess.run(["bash", str(ALLOW)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 2 and run.stderr.startswith("Usage: supervisor_allow.sh CONTAINER")


# ---------- the weights record: the node's `state/weights` beside the script, printed as it is (issue 31, 2) ----------


def installed(tmp_path: Path, record: str | None) -> Path:
    """The script where `pulumi up` puts it (`<remote_dir>/supervisor-allow.sh`), the node's weights record (None:
    none) in `<remote_dir>/state/weights`, and another record beside it that must never be read."""
    remote_dir = tmp_path / "spark-llm"
    (remote_dir / "state").mkdir(parents=True)
    script = remote_dir / "supervisor-allow.sh"
    script.write_text(ALLOW.read_text())
    script.chmod(0o755)
    if record is not None:
        (remote_dir / "state" / "weights").write_text(record)
    (remote_dir / "state" / "image").write_text("t sha256:secret-of-another-step\n")
    return script


@pytest.mark.parametrize("record", ["unverified -\n", "repair-0123456789ab " + "a" * 64 + "\n"])
def test_the_weights_record_request_prints_the_nodes_record_as_it_is_and_runs_no_docker(tmp_path, record):
    script = installed(tmp_path, record)
    run, seen = allow(tmp_path, RECORD_REQUEST, script=script)
    assert run.returncode == 0, run.stderr
    assert run.stdout == record and run.stderr == ""
    assert seen is None


def test_the_weights_record_request_allows_blanks_between_its_words(tmp_path):
    script = installed(tmp_path, "t d\n")
    run, _ = allow(tmp_path, f"  {RECORD_REQUEST.replace(' ', '   ')} ", script=script)
    assert run.returncode == 0 and run.stdout == "t d\n"


def test_a_node_without_a_weights_record_says_so_with_exit_3(tmp_path):
    """3, not 126 nor ssh's 255: the supervisor tells "no record" (the weights step never completed) from a refusal."""
    script = installed(tmp_path, None)
    run, _ = allow(tmp_path, RECORD_REQUEST, script=script)
    assert run.returncode == 3 and run.stdout == ""
    assert run.stderr == "spark-llm: no weights record on this node (the weights step never completed here)\n"


def test_the_record_is_found_beside_the_script_not_in_the_working_directory(tmp_path):
    """sshd starts the forced command in the user's home: the record is the script's neighbour wherever it runs."""
    script = installed(tmp_path, "t beside\n")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "state").mkdir(parents=True)
    (elsewhere / "state" / "weights").write_text("t wrong\n")
    env = {"PATH": "/usr/bin:/bin", "SSH_ORIGINAL_COMMAND": RECORD_REQUEST}
    run = subprocess.run(
        ["bash", str(script), ENGINE], env=env, cwd=elsewhere, capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 0 and run.stdout == "t beside\n"


def test_the_memory_request_prints_the_nodes_memory_through_the_probe_beside_the_script(tmp_path):
    """Issue 32, 1: the supervisor judges a worker's memory before a restart; its key reads it and nothing more."""
    remote = tmp_path / "remote"
    remote.mkdir()
    script = remote / "supervisor-allow.sh"
    script.write_text(ALLOW.read_text())
    (remote / "memory.sh").write_text(MEMORY_PROBE.read_text())
    run, seen = allow(tmp_path, MEMORY_REQUEST, script=script)
    assert run.returncode == 0, run.stderr
    lines = dict(line.split("\t", 1) for line in run.stdout.splitlines())
    assert lines["mem-info"].startswith("MemTotal=") and "mem-weights" not in lines and seen is None
    refused, _ = allow(tmp_path, MEMORY_REQUEST + " /etc", script=script)
    assert refused.returncode == 126 and "the memory or the fabric; refused: spark-llm memory /etc" in refused.stderr


def test_the_fabric_request_reads_what_a_restart_needs_as_the_supervisor_reads_the_heads(tmp_path):
    """Issue 41, 2: the supervisor judges every node's fabric before a restart of its own. A worker's key reads it
    with host_record.sh's fabric_record installed beside the script; the head's is read from its mounted /sys by
    spark_llm.group.fabric_ready.read_sysfs: the same fields from the same files (but /dev, which the head's
    supervisor cannot see)."""
    remote = tmp_path / "remote"
    remote.mkdir()
    script = remote / "supervisor-allow.sh"
    script.write_text(ALLOW.read_text())
    (remote / "host_record.sh").write_text(FABRIC_RECORD.read_text())
    sysfs = fake_sysfs(tmp_path / "sys", {"rocep1s0f0": "4: ACTIVE", "roceP2p1s0f0": "1: DOWN"})
    (tmp_path / "dev" / "infiniband").mkdir(parents=True)
    (tmp_path / "dev" / "infiniband" / "uverbs0").write_text("")
    devices = {"SPARK_LLM_SYSFS": str(sysfs), "SPARK_LLM_DEVFS": str(tmp_path / "dev")}
    request = shlex.join([*FABRIC_REQUEST.split(), IFACE])
    run, seen = allow(tmp_path, request, script=script, **devices)
    assert run.returncode == 0 and seen is None, run.stderr
    fields = fields_from(run.stdout)
    assert fields["port_state.roceP2p1s0f0"] == "DOWN" and fields["verbs_devices"] == "uverbs0", fields
    assert {**fields, "verbs_devices": NOT_READ} == read_sysfs(str(sysfs), [IFACE])
    for bad in (f"{request} ../../etc", f"{request};id", f"{request} $(id)", FABRIC_REQUEST):
        refused, _ = allow(tmp_path, bad, script=script, **devices)
        assert refused.returncode == 126 and "refused" in refused.stderr and not refused.stdout, bad
