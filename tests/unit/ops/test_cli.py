"""The operator CLI itself: the config read through `pulumi config --json`, its subcommands, and SIGINT."""

from __future__ import annotations

import json
import subprocess

from spark_llm.config import parse, raw_from_pulumi
from spark_llm.ops import cli
from spark_llm.ops.pulumi_cli import config_from_json


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
    assert set(cli.COMMANDS) == {
        "preflight",
        "status",
        "logs",
        "smoke",
        "restart",
        "exec",
        "rollback",
        "recipes",
        "init",
        "top",
        "dashboard",
    }
    args = cli.parser().parse_args(["logs", "--stack", "sim", "--config-file", "f.yaml", "--tail", "5", "-f"])
    assert (args.stack, args.config_file, args.tail, args.follow, args.json) == ("sim", "f.yaml", 5, True, False)


def test_cli_stops_on_sigint_even_when_started_with_it_ignored():
    """A shell starts background commands with SIGINT ignored; `spark-llm logs --follow` must still stop on it."""
    import signal
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


def test_ctrl_c_while_the_config_is_read_ends_with_a_line_and_130_not_a_traceback(monkeypatch, capfd):
    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli.PulumiCli, "load_stack", interrupted)
    assert cli.main(["status", "--stack", "sim"]) == 130
    err = capfd.readouterr().err
    assert err == "spark-llm status: interrupted\n"
    assert cli.main(["restart", "--stack", "sim"]) == 130
    assert capfd.readouterr().err == "spark-llm restart: interrupted; `spark-llm status` shows what runs on the nodes\n"
