"""What scripts/lib/discover.sh prints on a DGX Spark with one ConnectX-7 cable (port f1) up, as sections: the
twins and netdev names are the ones NVIDIA's dgx-spark-playbooks show (../shared/notes/real-sparks.md)."""

from __future__ import annotations

from spark_llm.ops.init.facts import NodeFacts, parse
from spark_llm.ops.sections import parse_sections


def section(name: str, body: str, rc: int = 0) -> str:
    return f"--- spark-llm:{name} ---\n{body}\n--- spark-llm:rc={rc} ---\n"


def spark_output(
    *,
    hostname: str = "spark-4a2b",
    fabric: str = "192.168.100.10/24",
    mtu: int = 9000,
    state: str = "4: ACTIVE",
    extra_addrs: str = "",
    gpu: str = "NVIDIA GB10",
    runtimes: str = '{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}',
    image: tuple[str, int] | None = None,
) -> str:
    roce = "\n".join(
        [
            "rocep1s0f0|1: DOWN|enp1s0f0np0 ",
            "roceP2p1s0f0|1: DOWN|enP2p1s0f0np0 ",
            f"rocep1s0f1|{state}|enp1s0f1np1 ",
            f"roceP2p1s0f1|{state}|enP2p1s0f1np1 ",
        ]
    )
    addrs = "\n".join(
        [
            "1: lo    inet 127.0.0.1/8 scope host lo",
            "2: enP7s7    inet 10.1.230.180/24 brd 10.1.230.255 scope global dynamic enP7s7",
            f"5: enp1s0f1np1    inet {fabric} brd 192.168.100.255 scope global enp1s0f1np1",
            "9: docker0    inet 172.17.0.1/16 brd 172.17.255.255 scope global docker0",
            *([extra_addrs] if extra_addrs else []),
        ]
    )
    links = "\n".join(
        [
            "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT",
            "2: enP7s7: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc mq state UP mode DEFAULT",
            "4: enp1s0f0np0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc mq state DOWN mode DEFAULT",
            f"5: enp1s0f1np1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu {mtu} qdisc mq state UP mode DEFAULT",
            f"7: enP2p1s0f1np1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu {mtu} qdisc mq state UP mode DEFAULT",
            "9: docker0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN mode DEFAULT",
        ]
    )
    text = (
        section("hostname", hostname)
        + section("arch", "aarch64")
        + section("meminfo", "MemTotal:       127611699 kB\nMemAvailable:   125304832 kB")
        + section("roce", roce)
        + section("ibdev2netdev", "bash: ibdev2netdev: command not found", rc=127)
        + section("addrs", addrs)
        + section("links", links)
        + section("route", "default via 10.1.230.1 dev enP7s7 proto dhcp src 10.1.230.180 metric 100")
        + section("gpu", gpu, rc=0 if gpu else 127)
        + section(
            "disk",
            "Filesystem 1-blocks Used Available Capacity Mounted on\n/dev/nvme0n1p2 3936818806784 "
            "1200000000000 2536818806784 33% /",
        )  # fmt: skip
        + section("docker", runtimes)
    )
    if image is not None:
        text += section("image", image[0], rc=image[1])
    return text


def spark(address: str = "10.1.230.180", **kwargs: object) -> NodeFacts:
    return parse(address, parse_sections(spark_output(**kwargs)))  # type: ignore[arg-type]
