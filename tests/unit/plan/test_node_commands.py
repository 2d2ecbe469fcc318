"""spark_llm.plan.node_commands: a printed fix is a command the operator CLI runs as printed."""

from __future__ import annotations

import shlex

from spark_llm.config import parse
from spark_llm.config.group import groups
from spark_llm.ops import cli, node_exec
from spark_llm.plan import deployment as plan
from spark_llm.plan import node_commands

TEMPLATE = plan.LAUNCH_TEMPLATE.read_text()


def test_a_printed_exec_command_parses_back_to_the_same_node_and_argv():
    printed = node_commands.exec_on("dual-spark", "spark-2", ["docker", "rm", "-f", "engine; rm -rf /"])
    argv = shlex.split(printed)
    assert argv[0] == "spark-llm"
    args = cli.parser().parse_args(argv[1:])
    assert (args.command, args.stack, args.node) == ("exec", "dual-spark", "spark-2")
    assert node_exec.remote_command(args) == ["docker", "rm", "-f", "engine; rm -rf /"]
    dashes = cli.parser().parse_args(shlex.split(node_commands.exec_on(None, "spark-1", ["ls", "--", "-x"]))[1:])
    assert (dashes.stack, node_exec.remote_command(dashes)) == (None, ["ls", "--", "-x"])


def test_a_workers_host_key_is_read_on_its_jump_host_and_the_heads_from_here(raw_config):
    p = plan.build_plan(groups(parse(raw_config))[0], TEMPLATE)
    head, worker = p.nodes[0], p.nodes[1]
    stack = node_commands.StackRef("s")
    assert node_commands.read_host_key(stack, head) == "ssh-keyscan -t ed25519 -p 22 " + head.ssh.host
    assert node_commands.read_host_key(stack, worker) == (
        f"spark-llm exec --stack s {head.name} -- ssh-keyscan -t ed25519 -p 22 {worker.ssh.host}"
    )


def test_a_refused_host_key_names_the_config_key_and_how_to_read_the_real_one(raw_config):
    p = plan.build_plan(groups(parse(raw_config))[0], TEMPLATE)
    text = node_commands.host_key_refused(p, "s", p.nodes[1].name)
    assert text.startswith("spark-llm:nodes[1].hostKey is not the host key spark-2 presents")
    assert node_commands.read_host_key(node_commands.StackRef("s"), p.nodes[1]) in text
    assert "cat /etc/ssh/ssh_host_ed25519_key.pub" in text


def test_a_command_printed_for_a_config_file_names_it():
    ref = node_commands.StackRef("sim", "/tmp/x/Pulumi.sim.yaml")
    args = cli.parser().parse_args(shlex.split(ref.exec_on("head", ["docker", "ps"]))[1:])
    assert (args.stack, args.config_file, args.node, node_exec.remote_command(args)) == (
        "sim",
        "/tmp/x/Pulumi.sim.yaml",
        "head",
        ["docker", "ps"],
    )
