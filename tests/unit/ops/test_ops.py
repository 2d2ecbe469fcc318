"""The operator CLI's pure parts: facts parsed from node output, check verdicts, tables, log interleaving,
status drift, smoke numbers, restart URNs; and the config read through `pulumi config --json`."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from spark_llm.config import parse, raw_from_pulumi
from spark_llm.ops import (
    cli,
    logs,
    preflight,
    preflight_checks,
    preflight_network,
    preflight_script,
    restart,
    smoke,
    status,
)
from spark_llm.ops.preflight_checks import Check, Limits
from spark_llm.ops.preflight_script import GB
from spark_llm.ops.pulumi_cli import config_from_json
from spark_llm.ops.render import FAIL, PASS, SIMULATED, SKIP, WARN, render_text
from spark_llm.ops.sections import SECTION_FUNCTION, Section, parse_sections
from spark_llm.plan import deployment as plan
from spark_llm.plan.node_commands import StackRef
from spark_llm.remote import runner, ssh
from spark_llm.remote.runner import NodeRun
from tests.conftest import HEAD_KEY, WORKER_KEY

TEMPLATE = plan.TEMPLATE_PATH.read_text()
LIMITS = Limits(
    model_size=100 * GB, model_size_from="test", disk_margin=10 * GB, memory_margin=4 * GB, max_clock_skew=1.0
)


def build(raw):
    return plan.build_plan(parse(raw), TEMPLATE)


def facts(**sections: tuple[int, str]) -> str:
    """What a node script prints: one `capture NAME` section per (exit code, output)."""
    return "".join(
        f"--- spark-llm:{name} ---\n{body}\n--- spark-llm:rc={rc} ---\n" for name, (rc, body) in sections.items()
    )


def ok_run(node: str, text: str, skew: float = 0.0) -> NodeRun:
    return NodeRun(node, 0, text, "", 0.5, clock_skew=skew, clock_error=0.001)


PING_OK = "2 packets transmitted, 2 received, 0% packet loss\nrtt min/avg/max/mdev = 0.050/0.120/0.190/0.070 ms"
LINKS = (
    "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT\n"
    "5: enp1s0f0np0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP mode DEFAULT\n"
    "6: enP2p1s0f0np0: <BROADCAST,MULTICAST> mtu 1500 qdisc mq state DOWN mode DEFAULT\n"
    "177: eth0@if178: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT"
)
ADDRS = (
    "1: lo    inet 127.0.0.1/8 scope host lo\n"
    "5: enp1s0f0np0    inet 192.168.200.12/24 brd 192.168.200.255 scope global enp1s0f0np0\n"
    "177: eth0    inet 10.1.230.180/24 brd 10.1.230.255 scope global eth0"
)


# The engine container as the program's probe function prints it (spark_llm.plan.observation.ENGINE_STATE_FUNCTION).
ABSENT = (0, 'engine\t{"status": "absent"}')
RUNNING = (0, 'engine\t{"status": "running", "exit_code": 0, "container_id": "abc", "labels": {}}')


def engine_section(state: str, code: int, started: str, finished: str, revision: str, cid: str, oom: str) -> str:
    labels = json.dumps({"spark-llm.group-revision": revision} if revision else {})
    fields = f'"status": "{state}", "exit_code": {code}, "container_id": "{cid}", "started_at": "{started}"'
    return f'engine\t{{{fields}, "finished_at": "{finished}", "oom_killed": {oom}, "labels": {labels}}}'


def healthy_head(**override: tuple[int, str]) -> str:
    sections = {
        "docker": (0, "28.3.1 linux/aarch64"),
        "gpu": (0, "GPU 0: NVIDIA GB10 (UUID: GPU-1234)"),
        "disk": (0, "400000000000 3900000000000 /home\n0"),
        "memory": (0, "MemTotal:       125000000 kB\nMemAvailable:   118000000 kB"),
        "links": (0, LINKS),
        "addrs": (0, ADDRS),
        "engine": ABSENT,
        "image": (0, "sha256:aaaa1111 linux/arm64"),
        "ports": (0, "LISTEN 0 128 0.0.0.0:22 0.0.0.0:*"),
        "fabric:spark-2": (0, PING_OK),
        "source": (0, str(119 * GB)),
    }
    return facts(**{**sections, **override})


def healthy_worker(**override: tuple[int, str]) -> str:
    sections = {
        "docker": (0, "28.3.1 linux/aarch64"),
        "gpu": (0, "GPU 0: NVIDIA GB10 (UUID: GPU-5678)"),
        "disk": (0, "400000000000 3900000000000 /home\n0"),
        "memory": (0, "MemTotal:       125000000 kB\nMemAvailable:   118000000 kB"),
        "links": (0, LINKS),
        "addrs": (0, ADDRS.replace("192.168.200.12", "192.168.200.13")),
        "engine": ABSENT,
        "image": (0, "sha256:aaaa1111 linux/arm64"),
        "fabric:spark-1": (0, PING_OK),
    }
    return facts(**{**sections, **override})


@pytest.fixture
def spark_plan(raw_config):
    raw_config["network"] = {"fabricInterfaces": ["enp1s0f0np0"], "mtu": 9000}
    return build(raw_config)


def judged(spark_plan, head: NodeRun | None = None, worker: NodeRun | None = None, limits=LIMITS, **kw):
    runs = {
        "spark-1": head if head is not None else ok_run("spark-1", healthy_head()),
        "spark-2": worker if worker is not None else ok_run("spark-2", healthy_worker()),
    }
    return {(c.node, c.check): c for c in preflight.judge(spark_plan, runs, kw.pop("presented", {}), limits, **kw)}


# ---------- sections and the scripts that print them ----------


def test_capture_sections_round_trip_through_bash():
    script = SECTION_FUNCTION + "capture a echo hi\ncapture b sh -c 'printf partial; exit 3'\ncapture c true\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    assert parse_sections(out) == {"a": Section(0, "hi"), "b": Section(3, "partial"), "c": Section(0, "")}


def test_a_section_cut_short_is_left_out():
    assert parse_sections("--- spark-llm:a ---\nhalf") == {}


@pytest.mark.parametrize("role", ["head", "worker"])
def test_node_scripts_are_valid_bash(spark_plan, role, tmp_path):
    node = spark_plan.head if role == "head" else spark_plan.workers[0]
    path = tmp_path / "facts.sh"
    path.write_text(runner.clock_script(preflight_script.node_script(spark_plan, node, check_flags=True)))
    subprocess.run(["bash", "-n", str(path)], check=True)
    path.write_text(status.node_script(spark_plan, node))
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_fabric_pings_fill_the_configured_mtu_from_both_sides(spark_plan):
    head = preflight_script.node_script(spark_plan, spark_plan.head, check_flags=False)
    worker = preflight_script.node_script(spark_plan, spark_plan.workers[0], check_flags=False)
    assert "capture fabric:spark-2 ping_mtu '192.168.200.13' 8972" in head
    assert "capture fabric:spark-1 ping_mtu '192.168.200.12' 8972" in worker
    assert "ping -n -q -M do -s" in head


def test_api_key_reaches_curl_through_a_descriptor_not_argv(raw_config):
    raw_config["apiKey"] = "sk-secret"
    script = status.node_script(build(raw_config), build(raw_config).head)
    assert "-H @<(printf 'Authorization: Bearer %s\\n' 'sk-secret')" in script


# ---------- the clock exchange and a failed ssh (bash standing in for ssh) ----------


@pytest.fixture
def local_bash(monkeypatch):
    monkeypatch.setattr(runner, "ssh_argv", lambda _config, _target, remote: remote)


def test_clock_exchange_measures_skew_and_runs_the_script(local_bash, spark_plan):
    run = runner.run(spark_plan.head.ssh, "echo done; cat; echo after", timeout=20, clock=True)
    assert run.ok and run.stdout == "done\nafter\n"  # the script's own commands read nothing from stdin
    # Same clock on both ends: the true skew (0) lies within the exchange's error bound.
    assert run.clock_skew is not None and run.clock_error is not None
    assert abs(run.clock_skew) <= run.clock_error + 0.01


def test_failed_ssh_returns_at_once_not_at_the_timeout(monkeypatch, spark_plan):
    # Regression: the end of the output was consumed by the clock handshake and the rest waited for the deadline.
    monkeypatch.setattr(
        runner, "ssh_argv", lambda *_: ["bash", "-c", "echo 'Host key verification failed.' >&2; exit 255"]
    )
    start = time.monotonic()
    run = runner.run(spark_plan.head.ssh, "true", timeout=30, clock=True)
    assert time.monotonic() - start < 5
    assert run.code == 255 and runner.failure_of(run).kind == "host key mismatch"


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("Host key verification failed.", "host key mismatch"),
        ("root@10.0.0.2: Permission denied (publickey).", "key refused"),
        ("ssh: connect to host 10.0.0.2 port 22: No route to host", "unreachable"),
        ("Connection timed out during banner exchange", "unreachable"),
        ("channel 0: open failed: connect failed: No route to host\nstdio forwarding failed", "unreachable"),
        ("kex_exchange_identification: read: Connection reset by peer", "unreachable"),
        ("something new", "ssh failed"),
    ],
    ids=["mismatch", "refused", "no-route", "banner-timeout", "jump-cannot-reach", "reset", "other"],
)
def test_ssh_failure_kinds(stderr, kind):
    assert ssh.ssh_failure(stderr).kind == kind


def test_fingerprint_matches_ssh_keygen(tmp_path):
    (tmp_path / "key.pub").write_text(HEAD_KEY + "\n")
    keygen = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "key.pub")], capture_output=True, text=True)
    assert ssh.fingerprint(HEAD_KEY) == keygen.stdout.split()[1]


# ---------- preflight verdicts ----------


def test_healthy_nodes_pass_every_check(spark_plan):
    checks = judged(spark_plan)
    assert {c.status for c in checks.values()} == {PASS}, [c for c in checks.values() if c.status != PASS]
    assert "fabric" in {check for _, check in checks} and ("spark-1", "ports") in checks


def test_a_simulated_node_is_reported_as_such_not_as_a_pass(spark_plan):
    head = ok_run("spark-1", healthy_head(gpu=(3, "simulated node: no GPU")))
    assert judged(spark_plan, head=head)["spark-1", "gpu"].status == SIMULATED
    missing = ok_run("spark-1", healthy_head(gpu=(127, "nvidia-smi: command not found")))
    assert judged(spark_plan, head=missing)["spark-1", "gpu"].status == FAIL


def test_host_key_mismatch_is_not_unreachable_and_names_the_key_to_pin(spark_plan):
    worker = NodeRun("spark-2", 255, "", "Host key verification failed.", 0.3)
    check = judged(spark_plan, worker=worker, presented={"spark-2": HEAD_KEY})["spark-2", "ssh"]
    assert check.status == FAIL and check.detail.startswith("host key mismatch")
    assert ssh.fingerprint(HEAD_KEY) in check.detail and ssh.fingerprint(WORKER_KEY) in check.detail
    # The worker's address is the head's view of it: the scan runs on the head, through the pinned ssh.
    assert "nodes[1].hostKey" in check.fix
    assert "`spark-llm exec spark-1 -- ssh-keyscan -t ed25519 -p 22 192.168.200.13`" in check.fix


def test_unreachable_worker_still_gets_the_heads_fabric_ping(spark_plan):
    worker = NodeRun("spark-2", 255, "", "ssh: connect to host 192.168.200.13 port 22: No route to host", 3.0)
    head = ok_run("spark-1", healthy_head(**{"fabric:spark-2": (1, "2 packets transmitted, 0 received")}))
    checks = judged(spark_plan, head=head, worker=worker)
    assert checks["spark-2", "ssh"].status == FAIL and "unreachable" in checks["spark-2", "ssh"].detail
    assert checks["spark-2", "fabric"].status == FAIL
    assert "spark-1 -> spark-2 192.168.200.13: no reply" in checks["spark-2", "fabric"].detail
    assert checks["spark-2", "other checks"].status == SKIP


def test_a_worker_behind_a_failed_head_is_not_tried(spark_plan):
    checks = preflight.judge(
        spark_plan, {"spark-1": NodeRun("spark-1", 255, "", "Connection refused", 0.1), "spark-2": None}, {}, LIMITS
    )
    worker_ssh = next(c for c in checks if c.node == "spark-2" and c.check == "ssh")
    assert worker_ssh.status == FAIL and "jump host spark-1 is not reachable" in worker_ssh.detail


def test_fabric_that_carries_only_small_packets_fails_on_the_mtu(spark_plan):
    head = ok_run("spark-1", healthy_head(**{"fabric:spark-2": (4, "ping: local error: message too long, mtu=1500")}))
    check = judged(spark_plan, head=head)["spark-2", "fabric"]
    assert check.status == FAIL and "9000-byte packets with don't-fragment do not" in check.detail


@pytest.mark.parametrize(
    ("interfaces", "links", "words"),
    [
        (["enp1s0f0np0"], LINKS, None),
        (["enp9s0"], LINKS, "no interface enp9s0"),
        (["enP2p1s0f0np0"], LINKS, "enP2p1s0f0np0 is down"),
        (["enp1s0f0np0"], LINKS.replace("mtu 9000", "mtu 1500"), "MTU 1500, below spark-llm:network.mtu 9000"),
        (
            ["eth0"],
            LINKS.replace("mtu 1500 qdisc noqueue", "mtu 9000 qdisc noqueue"),
            "192.168.200.12 is on enp1s0f0np0",
        ),
    ],
    ids=["ok", "missing", "down", "small-mtu", "address-elsewhere"],
)
def test_interfaces(spark_plan, interfaces, links, words):
    network = spark_plan.config.network.model_copy(update={"fabric_interfaces": interfaces})
    sections = parse_sections(facts(links=(0, links), addrs=(0, ADDRS)))
    check = preflight_network.check_interfaces("spark-1", network, "192.168.200.12", sections)
    assert check.status == (PASS if words is None else FAIL)
    assert words is None or words in check.detail


def test_a_fix_to_run_on_a_node_is_printed_as_spark_llm_exec_there_for_the_checked_stack(spark_plan):
    """A bare `sudo ip link set ... up` run where preflight printed it would change this machine's interface."""
    stack = StackRef("dual-spark", "conf/Pulumi.dual-spark.yaml")
    network = spark_plan.config.network.model_copy(update={"fabric_interfaces": ["enP2p1s0f0np0"]})
    sections = parse_sections(facts(links=(0, LINKS), addrs=(0, ADDRS)))
    check = preflight_network.check_interfaces("spark-1", network, "192.168.200.12", sections, stack)
    exec_on = "spark-llm exec --stack dual-spark --config-file conf/Pulumi.dual-spark.yaml spark-1 --"
    assert f"`{exec_on} sudo ip link set enP2p1s0f0np0 up`" in check.fix
    docker = preflight_checks.check_docker("spark-1", Section(1, "Cannot connect to the Docker daemon"), stack)
    assert f"`{exec_on} sudo systemctl start docker`" in docker.fix
    denied = preflight_checks.check_docker(
        "spark-1", Section(1, "permission denied while trying to connect"), stack, "aurora"
    )
    assert f"`{exec_on} sudo usermod -aG docker aurora`" in denied.fix


def test_no_configured_interface_is_a_skip_that_names_the_fabric_one(spark_plan):
    network = spark_plan.config.network.model_copy(update={"fabric_interfaces": []})
    check = preflight_network.check_interfaces(
        "spark-1", network, "192.168.200.12", parse_sections(facts(addrs=(0, ADDRS)))
    )
    assert check.status == SKIP and "set it to [enp1s0f0np0]" in check.fix


@pytest.mark.parametrize(
    ("free_gb", "present_gb", "size_gb", "status"),
    [(400, 0, 100, PASS), (105, 0, 100, FAIL), (30, 90, 100, PASS), (5, 0, None, FAIL), (400, 0, None, WARN)],
    ids=["room", "short", "weights-already-there", "below-margin", "size-unknown"],
)
def test_disk(spark_plan, free_gb, present_gb, size_gb, status):
    limits = Limits(size_gb and size_gb * GB, "test", 10 * GB, 4 * GB, 1.0)
    section = Section(0, f"{free_gb * GB} {4000 * GB} /home\n{present_gb * GB}")
    assert preflight_checks.check_disk("spark-2", spark_plan.config, section, limits).status == status


def test_memory_counts_a_nodes_share_of_the_weights_unless_our_engine_holds_it(spark_plan):
    tight = {"memory": Section(0, "MemTotal: 125000000 kB\nMemAvailable: 40000000 kB")}  # 41 GB available
    small = Limits(60 * GB, "test", 10 * GB, 4 * GB, 1.0)  # 30 GB a node + 4
    assert preflight_checks.check_memory("spark-1", tight, small, 2).status == PASS
    big = Limits(119 * GB, "test", 10 * GB, 4 * GB, 1.0)  # 59.5 GB a node + 4
    assert preflight_checks.check_memory("spark-1", tight, big, 2).status == FAIL
    running = {**tight, "engine": Section(*RUNNING)}
    assert preflight_checks.check_memory("spark-1", running, big, 2).status == PASS


def test_ports_held_by_our_engine_pass_and_by_another_process_fail(spark_plan):
    listening = Section(0, "LISTEN 0 5 0.0.0.0:30000 0.0.0.0:*\nLISTEN 0 64 192.168.200.12:20000 0.0.0.0:*")
    ours = {"ports": listening, "engine": Section(*RUNNING)}
    theirs = {"ports": listening, "engine": Section(*ABSENT)}
    assert preflight_network.check_ports(spark_plan.config, "spark-1", ours).status == PASS
    check = preflight_network.check_ports(spark_plan.config, "spark-1", theirs)
    assert check.status == FAIL and "30000 (engine.port), 20000 (engine.distPort)" in check.detail


@pytest.mark.parametrize(
    ("host", "status"), [("0.0.0.0", PASS), ("127.0.0.1", PASS), ("10.1.230.180", PASS), ("10.1.230.99", FAIL)]
)
def test_ports_fail_when_engine_host_is_not_an_address_of_the_head(spark_plan, host, status):
    cfg = spark_plan.config.model_copy(update={"engine": spark_plan.config.engine.model_copy(update={"host": host})})
    sections = {"ports": Section(0, ""), "engine": Section(*ABSENT), "addrs": Section(0, ADDRS)}
    check = preflight_network.check_ports(cfg, "spark-1", sections)
    assert check.status == status
    if status == FAIL:
        assert check.detail == (
            "spark-llm:engine.host 10.1.230.99 is not an address of spark-1 (10.1.230.180, 127.0.0.1,"
            " 192.168.200.12): the API cannot listen there"
        )


@pytest.mark.parametrize(
    ("mode", "role", "image", "status"),
    [
        ("transfer", "worker", (0, "sha256:aaaa1111 linux/arm64"), PASS),
        ("transfer", "worker", (1, "Error: No such image"), WARN),
        ("transfer", "head", (1, "Error: No such image"), FAIL),
        ("present", "worker", (1, "Error: No such image"), FAIL),
        ("present", "worker", (0, "sha256:bbbb2222 linux/arm64"), FAIL),
        ("transfer", "worker", (0, "sha256:bbbb2222 linux/arm64"), WARN),
        ("transfer", "worker", (0, "sha256:aaaa1111 linux/amd64"), FAIL),
    ],
    ids=[
        "same-id",
        "absent-transferred",
        "absent-on-head",
        "absent-present-mode",
        "other-id",
        "other-id-fixed",
        "arch",
    ],
)
def test_image(raw_config, mode, role, image, status):
    raw_config["image"] = {"ref": "lmsysorg/sglang:spark", "mode": mode}
    p = build(raw_config)
    node = p.head if role == "head" else p.workers[0]
    sections = parse_sections(facts(docker=(0, "28.3.1 linux/aarch64"), image=image))
    assert preflight_checks.check_image(p.config, node, sections, "sha256:aaaa1111").status == status


def test_a_node_of_another_architecture_fails_the_image_check(spark_plan):
    sections = parse_sections(facts(docker=(0, "28.3.1 linux/x86_64"), image=(0, "sha256:aaaa1111 linux/arm64")))
    check = preflight_checks.check_image(spark_plan.config, spark_plan.head, sections, None)
    assert check.status == FAIL and "runs linux/amd64" in check.detail


def test_clock_skew_beyond_the_limit_fails(spark_plan):
    checks = judged(spark_plan, worker=ok_run("spark-2", healthy_worker(), skew=-3.2))
    assert checks["spark-2", "clock"].status == FAIL and "-3.200 s" in checks["spark-2", "clock"].detail


SGLANG_HELP = """usage: launch_server.py [-h] --model-path MODEL_PATH [--served-model-name SERVED_MODEL_NAME]
  --tp-size TP_SIZE, --tensor-parallel-size TP_SIZE
  --nnodes NNODES  --node-rank NODE_RANK  --dist-init-addr DIST_INIT_ADDR
  --host HOST  --port PORT  --mem-fraction-static MEM_FRACTION_STATIC"""


def test_engine_flags_the_image_does_not_list_fail_and_abbreviations_pass(raw_config):
    raw_config["engine"] = {"flags": ["--language-model-only", "--mem-fraction-static", "0.8"]}
    p = build(raw_config)
    assert preflight_script.engine_help_command(p.config) == ["python3", "-m", "sglang.launch_server", "--help"]
    check = preflight_checks.check_flags(p.config, "spark-1", Section(0, SGLANG_HELP))
    # --tp is argparse's abbreviation of --tp-size: accepted. The seeds' vLLM flag is not.
    assert check.status == FAIL and "does not list --language-model-only (" in check.detail


def test_model_size_from_the_flag_the_head_or_unknown(raw_config):
    cfg = parse(raw_config)
    assert preflight.model_size(cfg, 119.0, {}) == (119 * GB, "--model-size-gb")
    assert preflight.model_size(cfg, None, {"source": Section(0, "5000")})[0] == 5000
    raw_config["model"]["source"] = {"kind": "huggingface", "repo": "Qwen/Q", "revision": "0" * 40}
    assert preflight.model_size(parse(raw_config), None, {})[0] is None


def test_checks_table_shows_node_check_status_and_fix():
    checks = [
        Check("spark-1", "ssh", PASS, "aurora@10.1.230.180:22"),
        Check("spark-2", "fabric", FAIL, "no reply", "check the cable"),
    ]
    text = render_text(preflight.checks_table(checks, "preflight"))
    lines = [line for line in text.splitlines() if "spark-2" in line]
    assert lines and "fabric" in lines[0] and "fail" in lines[0] and "check the cable" in lines[0]
    assert preflight.summary(checks)[FAIL] == 1


# ---------- status ----------

REV = "0123456789abcdef"


def node_run(node: str, engine: tuple[int, str], **more: tuple[int, str]) -> NodeRun:
    return ok_run(node, facts(engine=engine, now=(0, "1795000000.0"), **more))


def running(started: str, revision: str = REV) -> tuple[int, str]:
    return 0, engine_section("running", 0, started, "0001-01-01T00:00:00Z", revision, "abcdef0123456789", "false")


def statuses(spark_plan, head_inspect, worker_inspect):
    runs = [node_run("spark-1", head_inspect), node_run("spark-2", worker_inspect)]
    return [status.node_status(n, "spark-llm-engine", r) for n, r in zip(spark_plan.nodes, runs, strict=True)]


def with_revision(spark_plan):
    return spark_plan.__class__(**{**spark_plan.__dict__, "group_revision": REV})


def test_status_in_sync_when_every_member_runs_the_revision_and_the_head_started_last(spark_plan):
    p = with_revision(spark_plan)
    s = statuses(p, running("2026-11-30T10:00:05.5Z"), running("2026-11-30T10:00:01.123456789Z"))
    assert status.verdict(p, s, status.Health(200, (p.model_name,)))[0] == "in sync"


@pytest.mark.parametrize(
    ("owner", "verdict"),
    [
        ("ours abcdef0123456789", "in sync"),
        ("theirs abcdef0123456789", "drift"),
        ("theirs an-older-container", "in sync"),  # the record is of a container that is gone
    ],
    ids=["ours", "another-state", "stale-record"],
)
def test_status_names_an_engine_another_state_of_the_stack_started(spark_plan, owner, verdict):
    p = with_revision(spark_plan)
    runs = [
        node_run("spark-1", running("2026-11-30T10:00:05.5Z"), owner=(0, "ours abcdef0123456789")),
        node_run("spark-2", running("2026-11-30T10:00:01Z"), owner=(0, owner)),
    ]
    s = [status.node_status(n, "spark-llm-engine", r) for n, r in zip(p.nodes, runs, strict=True)]
    state, sentence = status.verdict(p, s, status.Health(200, (p.model_name,)), state_id="ours")
    assert state == verdict
    if verdict == "drift":
        assert sentence.startswith("spark-2's engine was started by another state of this stack: `pulumi up` restarts")


def test_status_says_drift_and_what_pulumi_up_does_for_an_exited_worker(spark_plan):
    p = with_revision(spark_plan)
    exited = (
        0,
        engine_section("exited", 137, "2026-11-30T10:00:01Z", "2026-11-30T10:30:00Z", REV, "abcdef012345", "false"),
    )
    s = statuses(p, running("2026-11-30T10:00:05Z"), exited)
    state, sentence = status.verdict(p, s, status.Health(200, (p.model_name,)))
    assert state == "drift"
    assert sentence == (
        "spark-2 exited (137): `pulumi up` restarts the group in order: "
        "spark-1 stopped, spark-2 stopped, spark-2 started, spark-1 started"
    )


@pytest.mark.parametrize(
    ("head", "worker", "words"),
    [
        (running("2026-11-30T10:00:05Z", "ffffffffffffffff"), None, "spark-1 runs revision ffffffffffffffff"),
        (None, ABSENT, "spark-2 has no spark-llm-engine container"),
        (None, running("2026-11-30T10:09:00Z"), "spark-2 restarted after the head"),
    ],
    ids=["old-revision", "removed", "restarted-by-hand"],
)
def test_status_drift(spark_plan, head, worker, words):
    p = with_revision(spark_plan)
    s = statuses(p, head or running("2026-11-30T10:00:05Z"), worker or running("2026-11-30T10:00:01Z"))
    state, sentence = status.verdict(p, s, status.Health(200, (p.model_name,)))
    assert state == "drift" and words in sentence and "`pulumi up` restarts the group in order" in sentence


def test_status_not_deployed_and_unhealthy(spark_plan):
    p = with_revision(spark_plan)
    absent = ABSENT
    assert status.verdict(p, statuses(p, absent, absent), None)[0] == "not deployed"
    s = statuses(p, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    state, sentence = status.verdict(p, s, status.Health(503, ()))
    assert state == "unhealthy" and "/health answers 503" in sentence


def test_status_uptime_and_head_health_from_the_scripts_output(spark_plan):
    run = node_run(
        "spark-1",
        running("2026-11-30T10:00:00Z"),
        health=(0, "200"),
        models=(0, json.dumps({"data": [{"id": "Qwen/Qwen3.5-122B-A10B-FP8"}]})),
    )
    s = status.node_status(spark_plan.head, "spark-llm-engine", run)
    assert s.state == "running" and s.uptime_s == pytest.approx(
        1795000000.0 - status.parse_time("2026-11-30T10:00:00Z")
    )
    health = status.head_health(run)
    assert health.healthy and health.models == ("Qwen/Qwen3.5-122B-A10B-FP8",)


def test_a_head_that_does_not_listen_says_so():
    run = node_run(
        "spark-1",
        (0, engine_section("exited", 1, "x", "y", "z", "id", "false")),
        health=(7, "000curl: (7) Failed to connect"),
    )
    assert status.head_health(run) == status.Health(None, (), "nothing listens on the port")


def test_status_table_lists_each_node(spark_plan):
    p = with_revision(spark_plan)
    s = statuses(p, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    text = render_text(status.status_table(p, s, status.Health(200, (p.model_name,))))
    assert "spark-1" in text and "spark-2" in text and "/health 200" in text and REV in text


def test_docker_times_parse_with_nanoseconds_and_trimmed_zeros():
    assert status.parse_time("2026-11-30T10:00:01.5Z") == pytest.approx(status.parse_time("2026-11-30T10:00:01Z") + 0.5)
    assert status.parse_time("0001-01-01T00:00:00Z") is None


# ---------- logs ----------


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


# ---------- smoke ----------


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


@pytest.mark.parametrize(("q", "value"), [(50, 2), (95, 4), (100, 4), (0, 1)])
def test_percentile_nearest_rank(q, value):
    assert smoke.percentile([4, 1, 3, 2], q) == value


# ---------- restart ----------


def test_worker_urns_come_from_the_stack_export(raw_config):
    p = build(raw_config)
    kind = "docker:index/container:Container"
    resources = [
        {"type": kind, "urn": "urn:x::spark-engine-spark-1"},
        {"type": kind, "urn": "urn:x::spark-engine-spark-2"},
        {"type": kind, "urn": "urn:x::spark-engine-spark-22"},  # another node's, not spark-2's
        {"type": kind, "urn": "urn:x::spark-engine-spark-2", "delete": True},  # pending delete: not the live one
        {"type": "command:remote:Command", "urn": "urn:x::spark-engine-spark-2-watch"},
    ]
    assert restart.worker_urns({"deployment": {"resources": resources}}, p) == ["urn:x::spark-engine-spark-2"]


def test_restart_start_order_by_container_start_time(spark_plan):
    s = statuses(spark_plan, running("2026-11-30T10:00:05Z"), running("2026-11-30T10:00:01Z"))
    assert restart.start_order(s) == ["spark-2", "spark-1"]


# ---------- the config, as `pulumi config --json` gives it ----------


def test_pulumi_config_json_parses_like_the_program(raw_config):
    doc = {
        f"spark-llm:{k}": {"value": v if isinstance(v, str) else json.dumps(v), "secret": False}
        for k, v in raw_config.items()
    }
    doc["spark-llm:apiKey"] = {"value": "sk-1", "secret": True}
    doc["spark-llm:hfToken"] = {"value": "", "secret": False}  # Pulumi.yaml's default for an unset optional key
    values, secrets = config_from_json(doc)
    assert secrets == {"apiKey"}
    cfg = parse(raw_from_pulumi(values), secrets)
    assert cfg.api_key == "sk-1" and cfg == parse({**raw_config, "apiKey": "sk-1"})


def test_cli_has_one_subcommand_per_ops_module():
    assert set(cli.COMMANDS) == {"preflight", "status", "logs", "smoke", "restart", "exec"}
    args = cli.parser().parse_args(["logs", "--stack", "sim", "--config-file", "f.yaml", "--tail", "5", "-f"])
    assert (args.stack, args.config_file, args.tail, args.follow, args.json) == ("sim", "f.yaml", 5, True, False)


def test_cli_stops_on_sigint_even_when_started_with_it_ignored():
    """A shell starts background commands with SIGINT ignored; `spark-llm logs --follow` must still stop on it."""
    import signal
    import subprocess
    import sys

    probe = (
        "import signal\n"
        "from spark_llm.ops import cli\n"
        "assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN\n"
        "try:\n"
        "    cli.main(['no-such-command'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    assert result.stdout.strip() == "True", result.stderr
