"""The stand-in engine's command lines: each entry point parses exactly its release's flags (from the catalogs),
refuses what the real one refuses with its usage and exit 2, and reads a config file as the real one does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.sim.standin_group import (
    ENGINE_DIR,
    SERVED_MODEL_NAME,
    WAIT_SECONDS,
    EngineGroup,
    engine_env,
    http_post,
    wait_until,
)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--model-path", "m", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (
            ["--model-path", "m", "--tp", "2", "--nnodes", "2", "--node-rank", "1"],
            "--dist-init-addr HOST:PORT is required",
        ),
        (
            ["--model-path", "m", "--tp", "2", "--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "127.0.0.1:1"],
            "--node-rank must be in [0, 1]",
        ),
        (["--model-path", "m", "--mem-fraction-static", "most"], "invalid float value: 'most'"),
        (["--model-path", "m", "--tp", "3", "--nnodes", "2"], "--tp-size (3) must be a positive multiple of --nnodes"),
        (["--tp", "2"], "the following arguments are required: --model-path/--model"),
    ],
)
def test_bad_command_line_exits_2_with_usage(args: list[str], error: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sglang.launch_server", *args],
        env=engine_env(None),
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("usage: launch_server.py")
    assert error in result.stderr


# Command lines checked against the real engines' flag catalogs, per version

CATALOGS = ["sglang-0.5.5", "sglang-0.5.17", "sglang-0.5.23", "vllm-0.11.0", "vllm-0.16.0", "vllm-0.33.0"]
ENTRY_MODULES = {
    "sglang.launch_server": ["-m", "sglang.launch_server"],
    "sglang": ["-m", "sglang.cli.main"],
    "vllm": ["-m", "vllm.entrypoints.cli.main"],
    "vllm.entrypoints.openai.api_server": ["-m", "vllm.entrypoints.openai.api_server"],
}
PARSE_ONLY = """
import json, sys
from dataclasses import asdict
from standin_engine.command_line import parse_launch
print(json.dumps(asdict(parse_launch(sys.argv[1], sys.argv[2:]).config)))
"""


def parse_only(entry: str, args: list[str], version: str | None) -> subprocess.CompletedProcess:
    """Parse a command line as the entry point would, without starting anything; stdout is the LaunchConfig."""
    env = engine_env({"SPARK_LLM_ENGINE_VERSION": version} if version else None)
    return subprocess.run(
        [sys.executable, "-c", PARSE_ONLY, entry, *args], env=env, capture_output=True, text=True, timeout=WAIT_SECONDS
    )


def run_entry(entry: str, args: list[str], version: str | None) -> subprocess.CompletedProcess:
    """Run the entry point itself; only for command lines that exit at once (bad flags, --help)."""
    env = engine_env({"SPARK_LLM_ENGINE_VERSION": version} if version else None)
    return subprocess.run(
        [sys.executable, *ENTRY_MODULES[entry], *args], env=env, capture_output=True, text=True, timeout=WAIT_SECONDS
    )


@pytest.mark.parametrize("catalog", CATALOGS)
def test_catalog_parser_registers_exactly_the_option_strings_of_the_catalog(catalog: str) -> None:
    engine, version = catalog.split("-")
    script = f"""
import json
from standin_engine.catalog import load_catalog
from standin_engine.flags import catalog_parser
catalog = load_catalog({engine!r}, {version!r})
parser = catalog_parser(catalog, prog="check")
print(json.dumps({{"registered": sorted(set(parser._option_string_actions) - {{"-h", "--help"}}),
                   "catalog": sorted(catalog.all_option_strings)}}))
"""
    result = subprocess.run([sys.executable, "-c", script], env=engine_env(None), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    options = json.loads(result.stdout)
    assert options["registered"] == options["catalog"]
    raw = json.loads(
        (ENGINE_DIR.parents[1] / "spark_llm" / "config" / "engine_catalogs" / f"{catalog}.json").read_text()
    )
    assert len(options["catalog"]) == raw["option_string_count"]


@pytest.mark.parametrize(
    ("entry", "version", "args", "expected"),
    [
        # --language-model-only: SGLang from 0.5.18, vLLM from 0.17 (the catalogs' language_model_only)
        ("sglang.launch_server", "0.5.23", ["--model-path", "m", "--language-model-only"], {}),
        ("vllm", "0.33.0", ["serve", "m", "--language-model-only"], {}),
        ("vllm", "0.33.0", ["serve", "m", "--no-language-model-only"], {}),
        # vLLM 0.16 still has --swap-space (0.33 dropped it)
        ("vllm", "0.16.0", ["serve", "m", "--swap-space", "4"], {}),
        ("vllm", "0.11.0", ["serve", "m", "--swap-space", "4"], {}),
        # vLLM turns _ into - in flag names (FlexibleArgumentParser)
        ("vllm", "0.33.0", ["serve", "m", "--max_model_len", "4096"], {"context_length": 4096}),
        ("vllm", "0.16.0", ["serve", "m", "--max_model_len=2k"], {"context_length": 2000}),
        ("vllm", "0.11.0", ["serve", "m", "--tensor_parallel_size", "2"], {"tp_size": 2}),
        # argparse's allow_abbrev: an unambiguous prefix is accepted
        ("sglang.launch_server", "0.5.23", ["--model-path", "m", "--tensor-para", "2"], {"tp_size": 2}),
        ("sglang.launch_server", "0.5.5", ["--model-path", "m", "--tp", "2"], {"tp_size": 2}),
        ("sglang.launch_server", "0.5.17", ["--model-path", "m", "--cuda-graph-max-bs", "8"], {}),
        # aliases and negations as declared
        ("sglang.launch_server", "0.5.23", ["--model", "m", "--tensor-parallel-size", "2"], {"model_path": "m"}),
        ("vllm", "0.33.0", ["serve", "m", "-tp", "2", "-pp", "2", "--disable-expert-parallel"], {"pp_size": 2}),
        ("vllm", "0.33.0", ["serve", "m", "--no-enable-expert-parallel", "--no-trust-remote-code"], {}),
        # vLLM's dotted JSON keys and -O
        ("vllm", "0.33.0", ["serve", "m", "--compilation-config.mode", "3", "-O3"], {}),
        ("vllm", "0.11.0", ["serve", "m", "-O3"], {}),
        # the model: positional, --model moved to the positional, vLLM's default, sglang serve's positional
        ("vllm", "0.33.0", ["serve", "--model", "m2", "--port", "8001"], {"model_path": "m2", "port": 8001}),
        ("vllm", "0.33.0", ["serve"], {"model_path": "Qwen/Qwen3-0.6B", "host": "0.0.0.0", "port": 8000}),
        ("vllm.entrypoints.openai.api_server", "0.16.0", ["--model", "m3"], {"model_path": "m3"}),
        ("sglang", "0.5.23", ["serve", "m4", "--model-type", "llm"], {"model_path": "m4"}),
        ("sglang", "0.5.5", ["serve", "--model-path", "m5"], {"model_path": "m5"}),
        # multi-node flags the stand-in acts on
        (
            "vllm",
            "0.16.0",
            ["serve", "m", "-tp", "2", "-n", "2", "-r", "1", "--master-addr", "10.0.0.1", "--headless"],
            {"nnodes": 2, "node_rank": 1, "dist_init_addr": "10.0.0.1:29501", "headless": True},
        ),
        (
            "vllm",
            "0.33.0",
            ["serve", "m", "--distributed-executor-backend", "ray", "-tp", "3", "--distributed-timeout-seconds", "9"],
            {"executor_backend": "ray", "tp_size": 3, "dist_timeout": 9},
        ),
        (
            "sglang.launch_server",
            "0.5.17",
            ["--model-path", "m", "--tp-size", "2", "--nnodes", "2", "--nccl-init-addr", "[::1]:5000"],
            {"dist_init_addr": "[::1]:5000", "host": "127.0.0.1", "port": 30000},
        ),
        # the default version is the newest catalog of the engine
        ("sglang.launch_server", None, ["--model-path", "m", "--language-model-only"], {"engine_version": "0.5.23"}),
        ("vllm", None, ["serve", "m", "--language-model-only"], {"engine_version": "0.33.0"}),
    ],
)
def test_real_flags_accepted_by_that_engine_version(
    entry: str, version: str | None, args: list[str], expected: dict
) -> None:
    result = parse_only(entry, args, version)
    assert result.returncode == 0, result.stderr
    config = json.loads(result.stdout)
    assert {key: config[key] for key in expected} == expected


@pytest.mark.parametrize(
    ("entry", "version", "args", "error"),
    [
        (
            "sglang.launch_server",
            "0.5.17",
            ["--model-path", "m", "--language-model-only"],
            "unrecognized arguments: --language-model-only",
        ),
        ("vllm", "0.16.0", ["serve", "m", "--language-model-only"], "unrecognized arguments: --language-model-only"),
        ("vllm", "0.33.0", ["serve", "m", "--swap-space", "4"], "unrecognized arguments: --swap-space 4"),
        # SGLang does not normalise _ to -
        (
            "sglang.launch_server",
            "0.5.23",
            ["--model-path", "m", "--mem_fraction_static", "0.8"],
            "--mem_fraction_static",
        ),
        (
            "sglang.launch_server",
            "0.5.5",
            ["--model-path", "m", "--tensor_parallel_size", "2"],
            "--tensor_parallel_size",
        ),
        (
            "sglang.launch_server",
            "0.5.23",
            ["--model-path", "m", "--cuda-graph-max-bs", "8"],
            "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
        ),
        ("vllm", "0.11.0", ["serve", "m", "--nnodes", "2"], "unrecognized arguments: --nnodes 2"),
        ("vllm", "0.16.0", ["serve", "m", "--disable-expert-parallel"], "unrecognized arguments"),
        ("sglang.launch_server", "0.5.23", ["--model-path", "m", "--tokenizer-mode", "fast"], "invalid choice: 'fast'"),
        ("vllm", "0.33.0", ["serve", "m", "--max-lora-rank", "7"], "invalid choice: 7"),
        ("sglang", "0.5.5", ["serve", "m"], "the following arguments are required: --model-path/--model"),
        (
            "vllm",
            "0.33.0",
            ["serve", "m", "-tp", "2", "--nnodes", "2", "--distributed-executor-backend", "ray"],
            "--nnodes/--node-rank are for the mp executor backend",
        ),
        ("vllm", "0.33.0", ["serve", "m", "--distributed-executor-backend", "slurm"], "is not one of"),
    ],
)
def test_flags_rejected_by_that_engine_version_exit_2_with_its_usage(
    entry: str, version: str, args: list[str], error: str
) -> None:
    result = run_entry(entry, args, version)
    assert result.returncode == 2, result.stderr[-2000:]
    assert error in result.stderr
    assert result.stderr.startswith("usage: ")


@pytest.mark.parametrize(
    ("entry", "args", "usage", "error_prefix"),
    [
        (
            "sglang.launch_server",
            ["--model-path", "m", "--bogus"],
            "usage: launch_server.py [-h] --model-path MODEL_PATH",
            "launch_server.py: error:",
        ),
        ("sglang", ["serve", "m", "--bogus"], "usage: sglang [-h] --model-path MODEL_PATH", "sglang: error:"),
        (
            "vllm",
            ["serve", "m", "--bogus"],
            "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...",
            "vllm: error:",
        ),
        ("vllm.entrypoints.openai.api_server", ["--bogus"], "usage: api_server.py [-h]", "api_server.py: error:"),
    ],
)
def test_usage_line_and_error_prefix_are_the_real_entry_points(
    entry: str, args: list[str], usage: str, error_prefix: str
) -> None:
    result = run_entry(entry, args, None)
    assert result.returncode == 2
    assert result.stderr.startswith(usage)
    assert result.stderr.splitlines()[-1] == f"{error_prefix} unrecognized arguments: --bogus"


def test_vllm_serve_help_shows_its_short_usage() -> None:
    result = run_entry("vllm", ["serve", "--help"], "0.33.0")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: vllm serve [model_tag] [options]")
    assert "--language-model-only" in result.stdout


def test_unknown_engine_version_exits_2_listing_the_known_ones() -> None:
    result = run_entry("vllm", ["serve", "m"], "0.12.0")
    assert result.returncode == 2
    assert "known vllm versions: 0.11.0, 0.16.0, 0.33.0" in result.stderr


def test_served_model_name_without_a_positional_model_fails_as_vllm_does() -> None:
    result = run_entry("vllm", ["serve", "--port", "8001", "--served-model-name", "x"], "0.33.0")
    assert result.returncode == 1
    assert "`model` should be provided as the first positional argument" in result.stderr


def test_config_file_carries_the_api_key_and_the_v1_routes_require_it(
    new_group: Callable[..., EngineGroup], tmp_path: Path
) -> None:
    """As both engines read `--config FILE`: the key never on the command line, /v1 wants it, /health does not."""
    secret = "sk-standin-0123456789"
    config = tmp_path / "api-key.yaml"
    config.write_text(f'# written by spark-llm\napi-key: "{secret}"\n')
    group = new_group(1, extra_args=("--config", str(config)))
    head = group.start(0)
    wait_until(lambda: head.health() == 200, "the head to be healthy")
    payload = {"model": SERVED_MODEL_NAME, "prompt": "hi", "max_tokens": 2}
    assert http_post(f"{head.url}/v1/completions", payload)[0] == 401
    body = json.dumps(payload).encode()
    for header, expected in ((f"Bearer {secret}", 200), ("Bearer wrong", 401), (secret, 401)):
        request = urllib.request.Request(
            f"{head.url}/v1/completions",
            body,
            {"Content-Type": "application/json", "Authorization": header},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
        assert status == expected, header
    # The key is in neither the log (server_args) nor the process's command line.
    assert secret not in head.log()
    assert secret not in Path(f"/proc/{head.process.pid}/cmdline").read_bytes().decode()


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("api-key: [a, b]\n", "plain scalars only"),
        ('api-key: "unterminated\n', "invalid double-quoted string"),
        ("- port\n", "expected `key: value`"),
    ],
)
def test_config_file_the_stand_in_cannot_read_exits_2_naming_the_line(tmp_path: Path, text: str, error: str) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    result = run_entry("sglang.launch_server", ["--model-path", "m", "--config", str(config)], "0.5.23")
    assert result.returncode == 2
    assert f"error: {config}:1: " in result.stderr and error in result.stderr


def test_command_line_wins_over_the_config_file(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("port: 1234\ntrust-remote-code: true\nhost: 127.0.0.1\n")
    sys.path.insert(0, str(ENGINE_DIR))
    try:
        from standin_engine.config_file import expand_config_file
    finally:
        sys.path.remove(str(ENGINE_DIR))
    argv = expand_config_file(["serve", "m", "--port", "999", "--config", str(config)])
    assert argv == ["serve", "m", "--port", "1234", "--trust-remote-code", "--host", "127.0.0.1", "--port", "999"]
