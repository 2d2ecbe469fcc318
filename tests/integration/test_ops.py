"""The operator CLI (`spark-llm`) on the sim (1 head + 1 worker), with the real pulumi CLI.

User stories: before `pulumi up`, preflight says what would break it, naming the node and the check (a cut
fabric, a host key that changed, a disk too small, a wrong interface name, a flag the engine does not know),
and on a healthy sim it passes with the GPU reported as simulated; after a worker's engine dies, status says
drift and what `pulumi up` will do about it; when the engine answers the canary's fixed prompt differently from
its start, status fails showing both answers; logs show both nodes' lines in time order; smoke reports numbers
from the stand-in engine; restart restarts the group in order through Pulumi and leaves preview clean; a node
without the memory its engine needs is named by preflight and preview, and `up` refuses before anything stops;
`preflight --bandwidth` measures the fabric each way within a quarter of the link's cap and speed (`sim link`), names
the tool and how it started, leaves no test server behind (also after Ctrl-C), and with RDMA devices but no
perftest names what is missing.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from tests.conftest import WORKER_KEY
from tests.integration.conftest import (
    REPO,
    SIM,
    SIM_DIR,
    SIM_IMAGE_TAG,
    STACK_FILE,
    Pulumi,
    SimCluster,
    complete,
    ctrl_c,
    run,
)
from tests.waits import wait_for

pytestmark = pytest.mark.integration

CONTAINER = "spark-llm-engine"


@dataclass
class SparkLlm:
    """`spark-llm COMMAND --stack sim --config-file <the test's copy>`, with the test's state backend."""

    pulumi: Pulumi

    def argv(self, command: str, *args: str) -> list[str]:
        config = ["--stack", "sim", "--config-file", str(self.pulumi.config_file)]
        return [sys.executable, "-m", "spark_llm.ops.cli", command, *config, *args]

    def __call__(self, command: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return run(self.argv(command, *args), env=self.pulumi.env, check=False, timeout=timeout)

    def json(self, command: str, *args: str, expect: int = 0, timeout: float = 300) -> dict:
        result = self(command, "--json", *args, timeout=timeout)
        assert result.returncode == expect, (
            f"exit {result.returncode}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
        return json.loads(result.stdout)


def checks_by_key(report: dict) -> dict[tuple[str, str], dict]:
    return {(c["node"], c["check"]): c for c in report["checks"]}


def failed(report: dict) -> set[tuple[str, str]]:
    return {(c["node"], c["check"]) for c in report["checks"] if c["status"] == "fail"}


@pytest.fixture(scope="module")
def deployed(pulumi: Pulumi) -> Iterator[Pulumi]:
    pulumi.up()
    yield pulumi


@pytest.fixture
def spark_llm(deployed: Pulumi) -> Iterator[SparkLlm]:
    deployed.reset_config()
    yield SparkLlm(deployed)
    deployed.reset_config()


# ---------- preflight ----------


def test_preflight_passes_on_a_healthy_sim_with_the_gpu_reported_as_simulated(spark_llm):
    report = spark_llm.json("preflight", "--check-flags")
    checks = checks_by_key(report)
    assert report["ok"] and report["counts"]["fail"] == 0
    for node in ("head", "worker-1"):
        assert checks[node, "gpu"] == {
            "node": node,
            "check": "gpu",
            "status": "simulated",
            "detail": "no GPU: simulated node",
            "fix": "",
        }
        for name in ("ssh", "clock", "docker", "disk", "memory", "interfaces", "image"):
            assert checks[node, name]["status"] == "pass", checks[node, name]
    assert "as pinned" in checks["worker-1", "ssh"]["detail"] and "via head" in checks["worker-1", "ssh"]["detail"]
    assert checks["worker-1", "fabric"]["status"] == "pass"
    assert "MTU 1500 don't-fragment: head -> worker-1" in checks["worker-1", "fabric"]["detail"]
    assert "held by our engine" in checks["head", "ports"]["detail"]
    assert checks["head", "engine flags"]["status"] == "pass"
    assert report["seconds"] < 30

    table = spark_llm("preflight")
    assert table.returncode == 0 and "ready for `pulumi up`" in table.stdout
    assert "no GPU: simulated node" in table.stdout


def test_preflight_names_a_worker_whose_host_key_differs_from_the_pin(spark_llm, deployed):
    deployed.set("nodes[1].hostKey", WORKER_KEY)  # well-formed, but not worker-1's key
    report = spark_llm.json("preflight", expect=1)
    ssh = checks_by_key(report)["worker-1", "ssh"]
    assert failed(report) == {("worker-1", "ssh")}
    assert ssh["detail"].startswith("host key mismatch: root@") and "unreachable" not in ssh["detail"]
    assert "spark-llm:nodes[1].hostKey" in ssh["fix"] and "ssh-keyscan -t ed25519" in ssh["fix"]
    # The printed way to read the key, run as printed: it prints worker-1's real key (scanned on the head).
    scan = next(part for part in ssh["fix"].split("`") if "ssh-keyscan" in part)
    read = run(["bash", "-c", scan], env=spark_llm.pulumi.env, check=False)
    real = yaml.safe_load(STACK_FILE.read_text())["config"]["spark-llm:nodes"][1]["hostKey"]
    assert read.returncode == 0 and real in read.stdout, (scan, read.stdout, read.stderr)


def test_preflight_fails_the_disk_check_when_the_model_does_not_fit(spark_llm):
    report = spark_llm.json("preflight", "--model-size-gb", "100000", expect=1)
    assert {("head", "disk"), ("worker-1", "disk")} <= failed(report)
    detail = checks_by_key(report)["worker-1", "disk"]["detail"]
    assert "needs 100000.0 GB + margin 10.0 GB" in detail


def test_preflight_fails_a_fabric_interface_name_the_nodes_do_not_have(spark_llm, deployed):
    deployed.set("network.fabricInterfaces[0]", "enp1s0f0np0")  # the Spark's name, not the sim's
    report = spark_llm.json("preflight", expect=1)
    assert failed(report) == {("head", "interfaces"), ("worker-1", "interfaces")}
    assert "no interface enp1s0f0np0 (has: " in checks_by_key(report)["worker-1", "interfaces"]["detail"]


def test_preflight_check_flags_names_a_flag_the_images_engine_does_not_list(spark_llm, deployed, sim_cluster):
    # The seeds' first failure: the config's release (0.5.23, the catalog check passes) is not what the image runs.
    # An image whose stand-in engine is SGLang 0.5.17, which has no --language-model-only, built on the head:
    old = "spark-llm/standin-engine:sglang-0.5.17"
    sim_cluster.node_exec("head", "docker", "rm", "-f", "spark-llm-old-engine", check=False)
    sim_cluster.node_exec("head", "docker", "create", "--name", "spark-llm-old-engine", SIM_IMAGE_TAG, "true")
    sim_cluster.node_exec(
        "head", "docker", "commit", "--change", "ENV SPARK_LLM_ENGINE_VERSION=0.5.17", "spark-llm-old-engine", old
    )
    sim_cluster.node_exec("head", "docker", "rm", "spark-llm-old-engine")
    stack = yaml.safe_load(deployed.config_file.read_text())
    stack["config"]["spark-llm:image"]["ref"] = old
    stack["config"]["spark-llm:engine"]["flags"] = ["--language-model-only"]  # `config set` reads it as its flag
    deployed.config_file.write_text(yaml.safe_dump(stack))
    report = spark_llm.json("preflight", "--check-flags", expect=1)
    assert failed(report) == {("head", "engine flags")}
    assert "does not list --language-model-only" in checks_by_key(report)["head", "engine flags"]["detail"]


# ---------- status, logs, smoke ----------


# The sim's fabric capped at this rate (`sim link`: tc tbf, and the speed the kernel reports for the interface).
LINK_MBIT = 400


def bandwidth_servers(sim_cluster: SimCluster) -> str:
    """The bandwidth test's processes on the worker (its server, and the `timeout` that bounds it)."""
    ps = sim_cluster.node_exec("worker-1", "ps", "-eo", "pid,args").stdout
    return "\n".join(line for line in ps.splitlines() if "iperf3" in line)


@pytest.fixture
def capped_link(sim_cluster):
    run([str(SIM), "link", str(LINK_MBIT)])
    yield
    run([str(SIM), "link", "off"])


def test_preflight_bandwidth_measures_the_fabric_each_way_against_the_links_speed(spark_llm, sim_cluster, capped_link):
    assert sim_cluster.node_exec("worker-1", "cat", "/sys/class/net/eth0/speed").stdout.strip() == str(LINK_MBIT)
    report = spark_llm.json("preflight", "--bandwidth")
    check = checks_by_key(report)["worker-1", "bandwidth"]
    assert check["status"] == "pass", check
    figures = re.findall(r"(head -> worker-1|worker-1 -> head) (\d+) Mbit/s", check["detail"])
    assert len(figures) == 2, check
    for leg, mbit in figures:
        assert 0.75 * LINK_MBIT <= int(mbit) <= 1.25 * LINK_MBIT, (leg, mbit, check)
    assert f"of a {LINK_MBIT} Mbit/s link" in check["detail"]
    assert (
        "iperf3 (TCP, 4 streams): on head the node's own /usr/bin/iperf3, on worker-1 the node's own"
        in (check["detail"])
    )
    assert bandwidth_servers(sim_cluster) == ""


def test_preflight_bandwidth_with_rdma_devices_and_no_perftest_names_what_is_missing(spark_llm, sim_cluster):
    run([str(SIM), "roce", "on"])  # RoCE devices on both nodes (no RDMA moves): ib_write_bw is the tool to use
    try:
        report = spark_llm.json("preflight", "--bandwidth", expect=1)
    finally:
        run([str(SIM), "roce", "off"])
    check = checks_by_key(report)["worker-1", "bandwidth"]
    assert check["status"] == "fail" and check["detail"].startswith(
        "not measured: ib_write_bw (both nodes have RDMA devices): head: neither the node nor the engine image"
    ), check
    assert check["fix"] == "install Debian's perftest on the nodes, or use an engine image that has ib_write_bw"
    assert failed(report) == {("worker-1", "bandwidth")}


def test_preflight_bandwidth_stops_the_workers_server_on_ctrl_c(spark_llm, sim_cluster):
    proc = subprocess.Popen(
        spark_llm.argv("preflight", "--bandwidth", "--bandwidth-seconds", "30"),
        env=spark_llm.pulumi.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    try:
        wait_for("the bandwidth test's server on worker-1", lambda: "iperf3 -s" in bandwidth_servers(sim_cluster), 60)
        proc.send_signal(signal.SIGINT)
        said = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and "Traceback" not in said, said[-3000:]
    # Stopped by the CLI on its way out, not by the server's own bound (2 x 31 + 30 s).
    assert bandwidth_servers(sim_cluster) == ""


def test_status_in_sync_after_up(spark_llm, deployed):
    report = spark_llm.json("status")
    assert report["state"] == "in sync" and not report["drift"]
    assert report["head"]["http_code"] == 200 and report["head"]["models"] == [deployed.outputs()["model"]]
    assert {n["node"]: n["revision"] for n in report["nodes"]} == {
        "head": report["config_revision"],
        "worker-1": report["config_revision"],
    }
    assert all(n["state"] == "running" and n["uptime_s"] > 0 for n in report["nodes"])


ANSWER_SALT = "/tmp/standin-answer-salt"  # the stand-in's answer knob (sim/engine/README.md): salts every answer


def test_status_fails_showing_both_answers_when_the_canary_changes_and_passes_when_it_is_back(spark_llm, sim_cluster):
    # The answer recorded at readiness, asked again: the same.
    report = spark_llm.json("status")
    canary = report["canary"]
    assert report["state"] == "in sync" and canary["ok"] and canary["changes"] == [], canary
    recorded = canary["recorded"]
    assert recorded["answer"] and recorded["answer"] == canary["now"]["answer"]
    assert recorded["nodes"] == ["head", "worker-1"] and recorded["revision"] == report["config_revision"]
    same = spark_llm("status")
    assert same.returncode == 0 and "canary: the same answer as at readiness" in same.stdout, same.stdout
    # The running engine now answers differently (no restart: same revision, same containers, /health 200).
    salt = f"echo changed-kernel > {ANSWER_SALT}"
    sim_cluster.node_exec("head", "docker", "exec", CONTAINER, "sh", "-c", salt)
    try:
        changed = spark_llm("status")
        assert changed.returncode == 1, changed.stdout + changed.stderr
        assert "answers changed: " in changed.stdout and "canary: changed since readiness: answer" in changed.stdout
        report = spark_llm.json("status", expect=1)
        now = report["canary"]["now"]["answer"]
        assert report["state"] == "answers changed" and report["canary"]["changes"] == ["answer"]
        assert now and now != recorded["answer"] and report["head"]["http_code"] == 200
        lines = changed.stdout.splitlines()
        assert any(line.startswith("  recorded at readiness: ") and repr(recorded["answer"]) in line for line in lines)
        assert any(line.startswith("  now: ") and repr(now) in line for line in lines), changed.stdout
    finally:
        sim_cluster.node_exec("head", "docker", "exec", CONTAINER, "rm", "-f", ANSWER_SALT)
    back = spark_llm.json("status")
    assert back["state"] == "in sync" and back["canary"]["now"]["answer"] == recorded["answer"]


def test_logs_show_both_nodes_lines_in_time_order(spark_llm):
    result = spark_llm("logs", "--tail", "20")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("head     ") for line in lines) and any(line.startswith("worker-1 ") for line in lines)
    stamps = [line.split()[1] for line in lines]
    assert stamps == sorted(stamps)
    assert any("Rendezvous" in line and line.startswith("worker-1") for line in lines)

    as_json = [
        json.loads(line)
        for line in spark_llm("logs", "--json", "--node", "worker-1", "--tail", "3").stdout.splitlines()
    ]
    assert len(as_json) == 3 and {entry["node"] for entry in as_json} == {"worker-1"}


def test_logs_follow_streams_every_node_until_ctrl_c(spark_llm, tmp_path):
    # stderr to a file: a pipe nobody reads could fill and stall the command; the file is shown on failure.
    errors = tmp_path / "stderr"
    with errors.open("w") as stderr:
        proc = subprocess.Popen(
            spark_llm.argv("logs", "--follow", "--tail", "2"),
            env=spark_llm.pulumi.env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=REPO,
        )
    assert proc.stdout is not None
    seen: set[str] = set()
    deadline = time.monotonic() + 30
    try:
        while seen != {"head", "worker-1"} and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line:
                seen.add(line.split()[0])
        assert seen == {"head", "worker-1"}
        # A request while following: its access-log line arrives from the head.
        spark_llm("smoke", "--requests", "1", "--concurrency", "1")
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if "POST /v1/chat/completions" in line:
                break
        assert "POST /v1/chat/completions" in line and line.startswith("head")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # the CLI dumps every thread's stack to stderr (faulthandler)
            with contextlib.suppress(AssertionError):  # a diagnostic: the failure below is reported without it
                wait_for("the CLI's stack dump", lambda: "most recent call first" in errors.read_text(), timeout_s=5)
            proc.kill()
            proc.wait()
            raise AssertionError(f"logs --follow ignored Ctrl-C for 20 s; its stderr:\n{errors.read_text()}") from None
    assert code == 0, errors.read_text()


def test_smoke_reports_time_to_first_token_tokens_per_second_and_no_errors(spark_llm):
    report = spark_llm.json("smoke", "--requests", "12", "--concurrency", "4", "--max-tokens", "32")
    first, load = report["first"], report["load"]
    assert report["ok"] and first["ok"] and first["tokens"] > 0 and first["ttft_s"] > 0
    assert (load["requests"], load["ok"], load["errors"]) == (12, 12, 0)
    assert load["ttft_ms"]["p50"] > 0 and load["tokens_per_s"] > 0 and load["completion_tokens"] > 0

    table = spark_llm("smoke", "--requests", "2", "--concurrency", "2")
    assert table.returncode == 0 and "time to first token" in table.stdout and "12/12" not in table.stdout


# ---------- drift, and the ordered restart through Pulumi ----------


def test_status_shows_drift_and_what_up_does_after_a_workers_engine_is_killed(spark_llm, deployed, sim_cluster):
    sim_cluster.node_exec("worker-1", "docker", "kill", CONTAINER)
    report = spark_llm.json("status", expect=1)
    worker = next(n for n in report["nodes"] if n["node"] == "worker-1")
    assert report["drift"] and worker["state"] == "exited" and worker["exit_code"] == 137
    assert "worker-1's engine container is exited (exit code 137)" in report["summary"]
    assert report["summary"].endswith(
        "`pulumi up` restarts the group in order: head stopped, worker-1 stopped, worker-1 started, head started"
    )
    table = spark_llm("status")
    assert table.returncode == 1 and "drift: " in table.stdout

    deployed.up()  # the operator loop: status said what up does; do it
    assert spark_llm.json("status")["state"] == "in sync"


def test_restart_replaces_the_workers_then_the_head_and_leaves_preview_clean(spark_llm, deployed, sim_cluster):
    # Ctrl-C in a restart (its `pulumi up --replace` started): Pulumi ends cleanly, nothing stays locked or running.
    ctrl_c(deployed, spark_llm.argv("restart", "--yes")[3:], 4.0)
    before = {node: sim_cluster.started_at(node, CONTAINER) for node in ("head", "worker-1")}
    report = spark_llm.json("restart", "--yes", timeout=600)
    assert report["ok"] and report["up_exit"] == 0 and report["preview_clean"]
    assert len(report["replaced"]) == 1 and report["replaced"][0].endswith("Container::spark-engine-worker-1")
    after = {node: sim_cluster.started_at(node, CONTAINER) for node in ("head", "worker-1")}
    assert after["worker-1"] > before["head"] and after["worker-1"] < after["head"]  # workers first, then the head
    assert report["start_order"] == ["worker-1", "head"] and set(report["restarted"]) == {"head", "worker-1"}
    assert deployed("preview", "--expect-no-changes", check=False).returncode == 0


def test_one_member_targeted_is_refused_and_one_replaced_restarts_the_whole_group_in_order(deployed, sim_cluster):
    """Issue 31, 7: `pulumi up --target` of the worker's container with a pending template change used to restart
    the worker alone (the head's engine died when its rank left; `up` exited 0); `--replace` of it stopped nothing
    first. Now the targeted `up` is refused before anything runs, and `--replace` restarts the group in order."""
    export = json.loads(deployed("stack", "export").stdout)
    worker = next(
        r["urn"]
        for r in export["deployment"]["resources"]
        if r["type"] == "docker:index/container:Container" and r["urn"].endswith("::spark-engine-worker-1")
    )
    before = {node: sim_cluster.started_at(node, CONTAINER) for node in ("head", "worker-1")}
    deployed.set("engine.env.IT_TARGETED", "1")  # a new revision: the whole group must restart
    try:
        for flags in (["--target", worker], ["--target-replace", worker]):
            alone = deployed.up(*flags, check=False)
            said = alone.stdout + alone.stderr
            assert alone.returncode != 0, said[-3000:]
            assert "would run only part of the engine group: one member would restart alone" in said, said[-3000:]
            assert "`spark-llm restart`" in said and "Traceback" not in said
        # Nothing ran: both engines are the ones from before.
        assert {node: sim_cluster.started_at(node, CONTAINER) for node in ("head", "worker-1")} == before
    finally:
        deployed.reset_config()
    replaced = deployed.up("--replace", worker)
    assert "`--replace` of worker-1: the whole group restarts in order" in replaced.stdout
    after = {node: sim_cluster.started_at(node, CONTAINER) for node in ("head", "worker-1")}
    assert before["head"] < after["worker-1"] < after["head"]  # both restarted, the worker first
    assert complete(deployed.outputs())["usage"]["completion_tokens"] == 4
    deployed("preview", "--expect-no-changes")


# ---------- last: cutting the fabric breaks the running group ----------


def test_memory_admission_warns_in_preview_refuses_up_before_anything_stops_and_drop_caches_lets_it_start(
    spark_llm, deployed, sim_cluster
):
    """Issue 32, 1: worker-1 has 10 GiB free and 100 GiB of page cache (the last weights read), and the stack moves
    to vLLM 0.16, whose start gate judges MemFree (before vLLM PR #35356): preflight and preview say so with the
    numbers and the fix; `up` refuses before any member stops, and the group that ran keeps serving, its
    containers the same; with spark-llm:memory.dropCaches the cache is dropped just before the engine starts."""
    members = ("head", "worker-1")

    def container_ids() -> dict[str, str]:
        return {n: sim_cluster.node_exec(n, "docker", "inspect", "-f", "{{.Id}}", CONTAINER).stdout for n in members}

    before = container_ids()
    run([str(SIM), "memory", "head", "--total-gib", "121", "--free-gib", "115"])
    run([str(SIM), "memory", "worker-1", "--total-gib", "121", "--free-gib", "10", "--cached-gib", "100"])
    try:
        deployed.set("engine.kind", "vllm")
        deployed.set("engine.version", "0.16.0")
        memory = checks_by_key(spark_llm.json("preflight", expect=1))["worker-1", "memory"]
        assert memory["status"] == "fail", memory
        assert "needs 108.9 GiB (--gpu-memory-utilization 0.9 x 121.0 GiB" in memory["detail"]
        assert "has 10.0 GiB (MemFree 10.0 GiB) of 121.0 GiB" in memory["detail"]
        assert "drop the page cache (100.0 GiB) before the start" in memory["fix"]

        preview = deployed("preview", check=False)
        assert preview.returncode == 0, preview.stderr[-3000:]
        assert "memory admission worker-1: refused: needs 108.9 GiB" in preview.stdout, preview.stdout[-3000:]
        assert "memory admission head" not in preview.stdout

        refused = deployed.up(check=False)
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0, said[-3000:]
        assert "memory admission worker-1: refused: needs 108.9 GiB" in said and "nothing was stopped" in said
        assert "spark-llm:memory.dropCaches true" in said and "Traceback" not in said
        assert container_ids() == before  # nothing stopped: the same containers, and they serve
        assert complete(deployed.outputs())["choices"]

        # Issue 41, 3: the head passed its admission in the `up` that failed; now the head cannot fit and worker-1
        # could (its cache dropped). The next `up` used to skip the head's recorded admission, stop the group and
        # restart it into the head preview called refused, exit 0; it judges every member again and refuses.
        run([str(SIM), "memory", "head", "--total-gib", "121", "--free-gib", "10"])
        deployed.set("memory.dropCaches", "true")
        preview = deployed("preview", check=False)
        assert "memory admission head: refused" in preview.stdout, preview.stdout[-3000:]
        # Status says what preview and `up` say: the restart `up` would make, refused (issue 41, 7).
        said = spark_llm.json("status", expect=1)
        assert said["state"] == "drift" and "; but memory admission head: refused" in said["summary"], said
        refused = deployed.up(check=False)
        said = refused.stdout + refused.stderr
        assert refused.returncode != 0 and "memory admission head: refused" in said, said[-3000:]
        assert container_ids() == before  # nothing stopped
        run([str(SIM), "memory", "head", "--total-gib", "121", "--free-gib", "115"])

        started = deployed.up()
        assert "page cache dropped on worker-1" in started.stdout, started.stdout[-3000:]
        meminfo = sim_cluster.node_exec("worker-1", "grep", "^MemFree:", "/proc/meminfo").stdout
        assert int(meminfo.split()[1]) == 110 * 1024**2  # the cache moved into MemFree
        after = container_ids()
        assert all(after[n] != before[n] for n in members)
        assert complete(deployed.outputs())["choices"]
        # Every admission recorded its token: the next `up` stops nothing and judges nothing.
        deployed("preview", "--expect-no-changes")
    finally:
        for node in members:
            run([str(SIM), "memory", node, "off"], check=False)


def reconnect_fabric(sim_cluster: SimCluster, node: str, address: str) -> None:
    """Back on the fabric with the same address, then the node restarted if the interface is not eth0 again:
    docker names a re-connected network's interface eth1, and the sim's stack pins eth0 (names are given in
    network-name order at start; renaming the link by hand instead breaks docker's next disconnect)."""
    run(["docker", "network", "connect", "--ip", address, f"{sim_cluster.prefix}-fabric", sim_cluster.container(node)])
    addrs = sim_cluster.node_exec(node, "ip", "-o", "-4", "addr").stdout
    if not any(line.split()[1] == "eth0" and f" {address}/" in line for line in addrs.splitlines()):
        run(["docker", "restart", sim_cluster.container(node)])
    ssh = ["ssh", "-F", str(SIM_DIR / "ssh_config"), "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", node]
    deadline = time.monotonic() + 90
    while run([*ssh, "docker", "info"], check=False, timeout=30).returncode != 0:
        assert time.monotonic() < deadline, f"{node} not back on ssh and docker within 90 s"
        time.sleep(2)


def test_preflight_names_the_worker_and_the_fabric_when_the_fabric_is_cut(spark_llm, sim_cluster):
    address = next(n for n in sim_cluster.nodes() if n["name"] == "worker-1")["fabricAddress"]
    run(["docker", "network", "disconnect", f"{sim_cluster.prefix}-fabric", sim_cluster.container("worker-1")])
    try:
        report = spark_llm.json("preflight", expect=1)
    finally:
        reconnect_fabric(sim_cluster, "worker-1", address)
    checks = checks_by_key(report)
    assert failed(report) == {("worker-1", "ssh"), ("worker-1", "fabric")}
    assert "unreachable" in checks["worker-1", "ssh"]["detail"]
    assert f"head -> worker-1 {address}: no reply" in checks["worker-1", "fabric"]["detail"]
    assert "the fabric" in checks["worker-1", "ssh"]["fix"]

    again = spark_llm.json("preflight")  # reconnected: every check passes again (the group died with the link)
    assert checks_by_key(again)["worker-1", "fabric"]["status"] == "pass"
    assert checks_by_key(again)["worker-1", "interfaces"]["status"] == "pass"
