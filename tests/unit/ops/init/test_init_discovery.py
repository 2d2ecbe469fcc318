"""What init reads of a node: the fabric port is the ACTIVE RoCE port with an address, both twins named."""

from __future__ import annotations

from spark_llm.ops.init.facts import port_key
from tests.unit.ops.init.spark_sections import spark


def test_a_spark_shows_its_cabled_port_its_twins_and_its_management_interface():
    facts = spark()
    assert facts.fabric_interface == "enp1s0f1np1"
    # One cable, two RoCE devices on two PCI domains; the second netdev carries no address of its own.
    assert facts.twins("enp1s0f1np1") == ["rocep1s0f1", "roceP2p1s0f1"]
    assert str(facts.address_on("enp1s0f1np1")) == "192.168.100.10/24"
    assert facts.interfaces["enp1s0f1np1"].mtu == 9000
    assert facts.management_interface == "enP7s7"  # it holds the address init reached the node at
    assert (facts.hostname, facts.arch, facts.gpus) == ("spark-4a2b", "aarch64", ("NVIDIA GB10",))
    assert round(facts.mem_total / 1024**3, 1) == 121.7
    assert (facts.disk_free, facts.disk_mount) == (2536818806784, "/")
    assert facts.nvidia_runtime and facts.unread == ()


def test_a_port_that_is_not_active_is_not_the_fabric():
    facts = spark(state="1: DOWN")
    assert facts.fabric_interface is None and facts.twins("enp1s0f1np1") == []


def test_twins_are_one_port_on_two_pci_domains_whatever_the_prefix_case():
    assert port_key("rocep1s0f1") == port_key("roceP2p1s0f1") == port_key("rocep2p1s0f1") == "p1s0f1"
    assert port_key("rocep1s0f0") != port_key("rocep1s0f1")


def test_docker_without_an_answer_is_not_a_runtime_list():
    facts = spark(runtimes="Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
    assert facts.runtimes is None and not facts.nvidia_runtime


def test_the_image_is_there_only_when_docker_inspect_found_it():
    assert spark(image=("sha256:abc", 0)).image_id == "sha256:abc"
    assert spark(image=("Error: No such image: x", 1)).image_id is None


def test_without_sysfs_ibdev2netdev_names_the_ports():
    from spark_llm.ops.init.facts import parse
    from spark_llm.ops.sections import parse_sections
    from tests.unit.ops.init.spark_sections import section, spark_output

    text = spark_output().replace("rocep1s0f0|1: DOWN|enp1s0f0np0 \nroceP2p1s0f0|1: DOWN|enP2p1s0f0np0 \n", "")
    text = text.replace("rocep1s0f1|4: ACTIVE|enp1s0f1np1 \nroceP2p1s0f1|4: ACTIVE|enP2p1s0f1np1 ", "")
    text = text.replace(
        section("ibdev2netdev", "bash: ibdev2netdev: command not found", rc=127),
        section("ibdev2netdev", "rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)\nrocep1s0f1 port 1 ==> enp1s0f1np1 (Up)\n"
                "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)"),
    )  # fmt: skip
    facts = parse("10.1.230.180", parse_sections(text))
    assert "|" not in parse_sections(text)["roce"].body  # sysfs said nothing
    assert facts.fabric_interface == "enp1s0f1np1"
    assert facts.twins("enp1s0f1np1") == ["rocep1s0f1", "roceP2p1s0f1"]
