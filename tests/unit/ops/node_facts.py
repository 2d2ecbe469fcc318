"""What the ops tests feed the operator CLI: a node script's output (`capture` sections), a node's run, the engine
container as the probe prints it, healthy nodes of the dual-spark plan; shared by the tests of this folder."""

from __future__ import annotations

import json

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.ops.preflight.checks import Limits
from spark_llm.ops.preflight.script import GB
from spark_llm.ops.status import read as status_read
from spark_llm.plan import deployment as plan
from spark_llm.remote.runner import NodeRun

TEMPLATE = plan.LAUNCH_TEMPLATE.read_text()
# The dual-spark stack's spark-llm:network.roceDevices: both twins of the cabled port.
TWINS = ["rocep1s0f0", "roceP2p1s0f0"]
LIMITS = Limits(model_size=100 * GB, model_size_from="test", disk_margin=10 * GB, max_clock_skew=1.0)


def build(raw):
    return plan.build_plan(groups(parse(raw))[0], TEMPLATE)


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


# The host as the program's probe prints it (spark_llm.plan.host_record), the part preflight's `rdma` row reads: both
# RoCE twins of the cabled port ACTIVE with a GID, the other port's DOWN, the verbs devices.
HOST = "\n".join(
    [
        "host.port_state.rocep1s0f0\tACTIVE",
        "host.gids.rocep1s0f0\t0000:0000:0000:0000:0000:ffff:c0a8:c80c",
        "host.port_state.rocep1s0f1\tDOWN",
        "host.port_state.roceP2p1s0f0\tACTIVE",
        "host.gids.roceP2p1s0f0\tfe80:0000:0000:0000:0000:0000:c0a8:c80c",
        "host.port_state.roceP2p1s0f1\tDOWN",
        "host.roce_devices\trocep1s0f0 rocep1s0f1 roceP2p1s0f0 roceP2p1s0f1",
        "host.verbs_devices\tuverbs0 uverbs1 uverbs2 uverbs3",
    ]
)


# The engine container as the program's probe function prints it (spark_llm.plan.observation.ENGINE_STATE_FUNCTION).
ABSENT = (0, 'engine\t{"status": "absent"}')
RUNNING = (0, 'engine\t{"status": "running", "exit_code": 0, "container_id": "abc", "labels": {}}')


def engine_section(state: str, code: int, started: str, finished: str, revision: str, cid: str, oom: str) -> str:
    labels = json.dumps({"spark-llm.group-revision": revision} if revision else {})
    fields = f'"status": "{state}", "exit_code": {code}, "container_id": "{cid}", "started_at": "{started}"'
    return f'engine\t{{{fields}, "finished_at": "{finished}", "oom_killed": {oom}, "labels": {labels}}}'


# A GB10 at rest as the memory probe prints it (spark_llm.plan.memory): no weights on it yet, no nvidia-smi answer.
MEMORY = "mem-info\tMemTotal=127600000 MemFree=123000000 MemAvailable=124500000\nmem-gpu\t!nvidia-smi not found"


def healthy_head(**override: tuple[int, str]) -> str:
    sections = {
        "docker": (0, "28.3.1 linux/aarch64"),
        "gpu": (0, "GPU 0: NVIDIA GB10 (UUID: GPU-1234)"),
        "disk": (0, "400000000000 3900000000000 /home\n0"),
        "memory": (0, MEMORY),
        "links": (0, LINKS),
        "addrs": (0, ADDRS),
        "host": (0, HOST),
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
        "memory": (0, MEMORY),
        "links": (0, LINKS),
        "addrs": (0, ADDRS.replace("192.168.200.12", "192.168.200.13")),
        "host": (0, HOST),
        "engine": ABSENT,
        "image": (0, "sha256:aaaa1111 linux/arm64"),
        "fabric:spark-1": (0, PING_OK),
    }
    return facts(**{**sections, **override})


# Each member's engine as status reads it (the status tests, and restart's start order).
REV = "0123456789abcdef"


def node_run(node: str, engine: tuple[int, str], **more: tuple[int, str]) -> NodeRun:
    return ok_run(node, facts(engine=engine, now=(0, "1795000000.0"), **more))


def running(started: str, revision: str = REV) -> tuple[int, str]:
    return 0, engine_section("running", 0, started, "0001-01-01T00:00:00Z", revision, "abcdef0123456789", "false")


def statuses(spark_plan, head_inspect, worker_inspect):
    runs = [node_run("spark-1", head_inspect), node_run("spark-2", worker_inspect)]
    return [status_read.node_status(n, "spark-llm-engine", r) for n, r in zip(spark_plan.nodes, runs, strict=True)]


def with_revision(spark_plan):
    return spark_plan.__class__(**{**spark_plan.__dict__, "group_revision": REV})
