"""`spark-llm preflight`: each check's verdict from the facts a node prints, the fixes it names, and its table."""

from __future__ import annotations

import dataclasses

import pytest

from spark_llm.ops.preflight import checks as preflight_checks
from spark_llm.ops.preflight import command as preflight
from spark_llm.ops.preflight import network as preflight_network
from spark_llm.ops.preflight import script as preflight_script
from spark_llm.ops.preflight.checks import Check, Limits
from spark_llm.ops.preflight.script import GB
from spark_llm.ops.render import FAIL, PASS, SIMULATED, SKIP, WARN, render_text
from spark_llm.ops.sections import Section, parse_sections
from spark_llm.plan.node_commands import StackRef
from spark_llm.plan.stack import StackPlan
from spark_llm.remote import ssh
from spark_llm.remote.runner import NodeRun
from tests.conftest import HEAD_KEY, WORKER_KEY
from tests.unit.ops.node_facts import (
    ABSENT,
    ADDRS,
    HOST,
    LIMITS,
    LINKS,
    RUNNING,
    build,
    facts,
    healthy_head,
    healthy_worker,
    ok_run,
)


def judged(spark_plan, head: NodeRun | None = None, worker: NodeRun | None = None, limits=LIMITS, **kw):
    runs = {
        "spark-1": head if head is not None else ok_run("spark-1", healthy_head()),
        "spark-2": worker if worker is not None else ok_run("spark-2", healthy_worker()),
    }
    stack, per_model = StackPlan.one(spark_plan), {spark_plan.model_name: limits}
    return {(c.node, c.check): c for c in preflight.judge(stack, runs, kw.pop("presented", {}), per_model, **kw)}


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
    runs = {"spark-1": NodeRun("spark-1", 255, "", "Connection refused", 0.1), "spark-2": None}
    checks = preflight.judge(StackPlan.one(spark_plan), runs, {}, {spark_plan.model_name: LIMITS})
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
        (["enp1s0f0np0"], LINKS.replace("mtu 9000", "mtu 1500"), "has MTU 1500, spark-llm:network.mtu is 9000"),
        (["enp1s0f0np0"], LINKS.replace("mtu 9000", "mtu 9216"), "has MTU 9216, spark-llm:network.mtu is 9000"),
        (
            ["eth0"],
            LINKS.replace("mtu 1500 qdisc noqueue", "mtu 9000 qdisc noqueue"),
            "192.168.200.12 is on enp1s0f0np0",
        ),
    ],
    ids=["ok", "missing", "down", "small-mtu", "larger-mtu", "address-elsewhere"],
)
def test_interfaces(spark_plan, interfaces, links, words):
    plan = dataclasses.replace(spark_plan, fabric_interfaces=tuple(interfaces))
    sections = parse_sections(facts(links=(0, links), addrs=(0, ADDRS)))
    check = preflight_network.check_interfaces(plan, "spark-1", "192.168.200.12", sections)
    assert check.status == (PASS if words is None else FAIL)
    assert words is None or words in check.detail


def test_mtus_set_apart_fail_the_node_off_the_configured_one_naming_the_others(spark_plan):
    """Issue 41: nodes at 9000 and 1500 passed when spark-llm:network.mtu was 1500 (only a lower MTU failed)."""
    plan = dataclasses.replace(spark_plan, fabric_mtu=1500)
    head = ok_run("spark-1", healthy_head(links=(0, LINKS.replace("mtu 9000", "mtu 1500"))))
    checks = judged(plan, head=head)
    assert checks["spark-1", "interfaces"].status == PASS
    worker = checks["spark-2", "interfaces"]
    assert worker.status == FAIL
    assert (
        worker.detail
        == "spark-2's enp1s0f0np0 has MTU 9000, spark-llm:network.mtu is 1500 (spark-1's enp1s0f0np0 1500)"
    )
    assert worker.fix.startswith(
        "set MTU 1500 there (`spark-llm exec spark-2 -- sudo ip link set enp1s0f0np0 mtu 1500`"
    )


def test_the_rdma_row_passes_with_every_configured_device_active_with_an_address(spark_plan):
    check = judged(spark_plan)["spark-2", "rdma"]
    assert check.status == PASS
    assert check.detail == (
        "rocep1s0f0, roceP2p1s0f0 ACTIVE, each with an address (GID); /dev/infiniband: uverbs0 uverbs1 uverbs2 uverbs3"
    )


def test_the_rdma_row_fails_a_device_the_node_does_not_have_naming_the_node_and_the_key(spark_plan):
    plan = dataclasses.replace(spark_plan, roce_devices=("rocep1s0f0", "rocep9s0f9"))
    checks = judged(plan)
    for node in ("spark-1", "spark-2"):
        check = checks[node, "rdma"]
        assert check.status == FAIL
        assert check.detail.startswith(f"spark-llm:network.roceDevices names rocep9s0f9, which {node} does not have")
        assert f"`spark-llm exec {node} -- ibdev2netdev` lists them" in check.fix


def test_the_rdma_row_fails_a_port_that_is_down(spark_plan):
    host = HOST.replace("host.port_state.roceP2p1s0f0\tACTIVE", "host.port_state.roceP2p1s0f0\tDOWN")
    check = judged(spark_plan, worker=ok_run("spark-2", healthy_worker(host=(0, host))))["spark-2", "rdma"]
    assert check.status == FAIL
    assert check.detail == (
        "spark-2's RoCE device roceP2p1s0f0 (spark-llm:network.roceDevices) is DOWN, not ACTIVE: NCCL would not open it"
    )


def test_without_roce_devices_the_rdma_row_says_nccl_runs_over_sockets(spark_plan):
    plan = dataclasses.replace(spark_plan, rdma=False, roce_devices=())
    check = judged(plan)["spark-1", "rdma"]
    assert check.status == SKIP and check.detail == "spark-llm:network.roceDevices is empty: NCCL runs over TCP sockets"


def test_a_fix_to_run_on_a_node_is_printed_as_spark_llm_exec_there_for_the_checked_stack(spark_plan):
    """A bare `sudo ip link set ... up` run where preflight printed it would change this machine's interface."""
    stack = StackRef("dual-spark", "conf/Pulumi.dual-spark.yaml")
    plan = dataclasses.replace(spark_plan, fabric_interfaces=("enP2p1s0f0np0",))
    sections = parse_sections(facts(links=(0, LINKS), addrs=(0, ADDRS)))
    check = preflight_network.check_interfaces(plan, "spark-1", "192.168.200.12", sections, stack)
    exec_on = "spark-llm exec --stack dual-spark --config-file conf/Pulumi.dual-spark.yaml spark-1 --"
    assert f"`{exec_on} sudo ip link set enP2p1s0f0np0 up`" in check.fix
    docker = preflight_checks.check_docker("spark-1", Section(1, "Cannot connect to the Docker daemon"), stack)
    assert f"`{exec_on} sudo systemctl start docker`" in docker.fix
    denied = preflight_checks.check_docker(
        "spark-1", Section(1, "permission denied while trying to connect"), stack, "aurora"
    )
    assert f"`{exec_on} sudo usermod -aG docker aurora`" in denied.fix


def test_no_configured_interface_is_a_skip_that_names_the_fabric_one(spark_plan):
    plan = dataclasses.replace(spark_plan, fabric_interfaces=())
    check = preflight_network.check_interfaces(
        plan, "spark-1", "192.168.200.12", parse_sections(facts(addrs=(0, ADDRS)))
    )
    assert check.status == SKIP and "set it to [enp1s0f0np0]" in check.fix


@pytest.mark.parametrize(
    ("free_gb", "present_gb", "size_gb", "status"),
    [(400, 0, 100, PASS), (105, 0, 100, FAIL), (30, 90, 100, PASS), (5, 0, None, FAIL), (400, 0, None, WARN)],
    ids=["room", "short", "weights-already-there", "below-margin", "size-unknown"],
)
def test_disk(spark_plan, free_gb, present_gb, size_gb, status):
    limits = Limits(size_gb and size_gb * GB, "test", 10 * GB, 1.0)
    section = Section(0, f"{free_gb * GB} {4000 * GB} /home\n{present_gb * GB}")
    assert preflight_checks.check_disk("spark-2", spark_plan, section, limits).status == status


def _memory(free_kb: int, gpu: str = "!nvidia-smi not found") -> dict[str, Section]:
    body = f"mem-info\tMemTotal=127600000 MemFree={free_kb} MemAvailable={free_kb}\nmem-gpu\t{gpu}"
    return {"memory": Section(0, body)}


def test_memory_is_the_admission_pulumi_up_runs_with_the_weights_from_the_source(spark_plan):
    # SGLang without a memory flag: the rank's weights (119 GB over 2 nodes) + the engine's reserve; MemAvailable.
    limits = Limits(119 * GB, "test", 10 * GB, 1.0)
    node = spark_plan.nodes[0]
    roomy = preflight_checks.check_memory(spark_plan, node, _memory(123_000_000), limits)
    assert roomy.status == PASS and "its weights share 55.4 GiB (1/2 of 110.8 GiB)" in roomy.detail
    tight = preflight_checks.check_memory(spark_plan, node, _memory(40_000_000), limits)
    assert (
        tight.status == FAIL
        and "needs 61.4 GiB (weights 55.4 GiB + engine 6.0 GiB" in tight.detail
        and "has 38.1 GiB" in tight.detail
    )
    assert tight.fix == ""  # nothing to drop, nobody else's process, no memory flag to lower
    ours = preflight_checks.check_memory(
        spark_plan, node, _memory(40_000_000, f"=7:{80 * 1024}:spark-llm-engine"), limits
    )
    assert ours.status == PASS and "+ 80.0 GiB our engine frees" in ours.detail


def test_memory_not_read_fails_never_passes(spark_plan):
    got = preflight_checks.check_memory(spark_plan, spark_plan.nodes[1], {}, Limits(None, "test", 10 * GB, 1.0))
    assert got.status == FAIL and got.detail == "cannot read its memory: the memory probe printed nothing"


def test_ports_held_by_our_engine_pass_and_by_another_process_fail(spark_plan):
    listening = Section(0, "LISTEN 0 5 0.0.0.0:30000 0.0.0.0:*\nLISTEN 0 64 192.168.200.12:20000 0.0.0.0:*")
    ours = {"ports": listening, "engine": Section(*RUNNING)}
    theirs = {"ports": listening, "engine": Section(*ABSENT)}
    assert preflight_network.check_ports(spark_plan, "spark-1", ours).status == PASS
    check = preflight_network.check_ports(spark_plan, "spark-1", theirs)
    assert check.status == FAIL and "30000 (engine.port), 20000 (engine.distPort)" in check.detail


def test_the_router_port_is_checked_too_held_by_our_router_or_taken_by_another_process(spark_plan):
    plan = dataclasses.replace(spark_plan, router_port=4000)
    listening = Section(0, "LISTEN 0 5 0.0.0.0:4000 0.0.0.0:*")
    free = preflight_network.check_ports(plan, "spark-1", {"ports": Section(0, ""), "engine": Section(*ABSENT)})
    assert free.status == PASS and "4000 (router.port) free" in free.detail
    ours = {"ports": listening, "engine": Section(*ABSENT), "router": Section(0, "running")}
    held = preflight_network.check_ports(plan, "spark-1", ours)
    assert held.status == PASS and "4000 (router.port) held by our router spark-llm-router" in held.detail
    theirs = preflight_network.check_ports(plan, "spark-1", {**ours, "router": Section(1, "No such object")})
    assert theirs.status == FAIL and theirs.detail == "in use by something other than our engine: 4000 (router.port)"
    assert theirs.fix.endswith("or choose other spark-llm:router ports")


@pytest.mark.parametrize(
    ("host", "status"), [("0.0.0.0", PASS), ("127.0.0.1", PASS), ("10.1.230.180", PASS), ("10.1.230.99", FAIL)]
)
def test_ports_fail_when_engine_host_is_not_an_address_of_the_head(spark_plan, host, status):
    plan = dataclasses.replace(spark_plan, api_host=host)
    sections = {"ports": Section(0, ""), "engine": Section(*ABSENT), "addrs": Section(0, ADDRS)}
    check = preflight_network.check_ports(plan, "spark-1", sections)
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
    assert preflight_checks.check_image(p, node, sections, "sha256:aaaa1111").status == status


def test_a_node_of_another_architecture_fails_the_image_check(spark_plan):
    sections = parse_sections(facts(docker=(0, "28.3.1 linux/x86_64"), image=(0, "sha256:aaaa1111 linux/arm64")))
    check = preflight_checks.check_image(spark_plan, spark_plan.head, sections, None)
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
    assert preflight_script.engine_help_command(p) == ["python3", "-m", "sglang.launch_server", "--help"]
    check = preflight_checks.check_flags(p, "spark-1", Section(0, SGLANG_HELP))
    # --tp is argparse's abbreviation of --tp-size: accepted. The seeds' vLLM flag is not.
    assert check.status == FAIL and "does not list --language-model-only (" in check.detail


def test_model_size_from_the_flag_the_head_or_unknown(raw_config):
    plan = build(raw_config)
    assert preflight.model_size(plan, 119.0, {}) == (119 * GB, "--model-size-gb")
    assert preflight.model_size(plan, None, {"source": Section(0, "5000")})[0] == 5000
    raw_config["model"]["source"] = {"kind": "huggingface", "repo": "Qwen/Q", "revision": "0" * 40}
    assert preflight.model_size(build(raw_config), None, {})[0] is None


def test_checks_table_shows_node_check_status_and_fix():
    checks = [
        Check("spark-1", "ssh", PASS, "aurora@10.1.230.180:22"),
        Check("spark-2", "fabric", FAIL, "no reply", "check the cable"),
    ]
    text = render_text(preflight.checks_table(checks, "preflight"))
    lines = [line for line in text.splitlines() if "spark-2" in line]
    assert lines and "fabric" in lines[0] and "fail" in lines[0] and "check the cable" in lines[0]
    assert preflight.summary(checks)[FAIL] == 1
