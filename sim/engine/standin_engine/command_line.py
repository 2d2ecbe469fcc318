"""The real engines' command lines, by entry point, parsed with the catalog of the chosen version into a LaunchConfig.

The stand-in acts on a few flags (model, served name, parallel sizes, nodes, rendezvous address, host, port,
headless, executor backend, timeouts); every other flag of that version is accepted and ignored.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from standin_engine.argv_rewrites import CommandLineError, vllm_flexible_args
from standin_engine.catalog import CatalogError, EngineCatalog, load_catalog, selected_version, version_key
from standin_engine.config_file import ConfigFileError, expand_config_file
from standin_engine.flags import catalog_parser
from standin_engine.launch_config import LaunchConfig, join_host_port, launch_config_problem

DEFAULT_CONTEXT_LENGTH = 8192
# As the real engines: their flags default to None, i.e. torch.distributed's ProcessGroupNCCL timeout, 10 minutes since
# torch 2.2 (spark_llm/plan/start/rendezvous.py). 300 here once let the head time out before the gate named the hung
# worker (issue 31, 4).
DEFAULT_DIST_TIMEOUT_SECONDS = 600
DIST_TIMEOUT_ENV = "STANDIN_DIST_TIMEOUT_SECONDS"
"""Group-formation timeout where the command line has no flag for it (vLLM before 0.33, Ray's node wait)."""

VLLM_DEFAULT_MODEL = "Qwen/Qwen3-0.6B"  # vLLM's `--model` default, recorded in its catalogs
# `vllm` top-level subcommands of the 0.11 era: the catalogs record the serve parser only, not this list.
VLLM_SUBCOMMANDS = ("chat", "complete", "serve", "bench", "collect-env", "run-batch")
# `sglang serve MODEL` (positional model, rewritten to --model-path) and `--model-type` exist from 0.5.17 on
# (the catalogs' launch.serve_wrapper_extras); 0.5.5's `sglang serve` needs --model-path.
SGLANG_SERVE_POSITIONAL_MODEL_SINCE = (0, 5, 17)


@dataclass(frozen=True, kw_only=True)
class EntryPoint:
    """One way the real engine is started (`python3 -m sglang.launch_server`, `vllm serve`...)."""

    engine: str
    command: str
    """How a person types it, for logs."""
    prog: str
    """argparse prog of the parser that reports errors (the real one's basename of sys.argv[0])."""
    parse: Callable[[EntryPoint, EngineCatalog, list[str]], tuple[argparse.ArgumentParser, argparse.Namespace]]
    deprecation: Callable[[EngineCatalog], str | None] = lambda _catalog: None
    """A warning the real entry point prints for this version, or None."""


def _parse_sglang_launch_server(
    entry: EntryPoint, catalog: EngineCatalog, argv: list[str]
) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    parser = catalog_parser(catalog, prog=entry.prog)
    return parser, parser.parse_args(argv)


def _parse_sglang_cli(
    entry: EntryPoint, catalog: EngineCatalog, argv: list[str]
) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """`sglang serve ...` (sglang/cli/main.py + cli/serve.py): the serve argv goes to the server parser."""
    top = argparse.ArgumentParser(prog=entry.prog)
    subcommands = top.add_subparsers(dest="subcommand", required=True)
    subcommands.add_parser("serve", help="Launch an SGLang server.", add_help=False)
    subcommands.add_parser("generate", help="Run inference on a multimodal model.", add_help=False)
    subcommands.add_parser("version", help="Show the version information.")
    args, serve_argv = top.parse_known_args(argv)
    if args.subcommand == "version":
        print(f"sglang version: {catalog.version} (spark-llm stand-in)")
        raise SystemExit(0)
    if args.subcommand != "serve":
        top.error(f"the spark-llm stand-in simulates `sglang serve` only, not `sglang {args.subcommand}`")
    if catalog.version_tuple >= SGLANG_SERVE_POSITIONAL_MODEL_SINCE:
        serve_argv = _without_model_type(top, serve_argv)
        if serve_argv and not serve_argv[0].startswith("-"):
            serve_argv = ["--model-path", *serve_argv]
    parser = catalog_parser(catalog, prog=entry.prog)
    return parser, parser.parse_args(serve_argv)


def _without_model_type(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`sglang serve` consumes `--model-type llm|...` before the server parser; only `llm`/`auto` are simulated."""
    kept, index = [], 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--model-type" or arg.startswith("--model-type="):
            value = arg.partition("=")[2] if "=" in arg else (argv[index + 1] if index + 1 < len(argv) else "")
            index += 1 if "=" in arg else 2
            if value not in ("auto", "llm"):
                parser.error(f"--model-type {value!r}: the spark-llm stand-in serves language models only (llm, auto)")
            continue
        kept.append(arg)
        index += 1
    return kept


def _parse_vllm_cli(
    entry: EntryPoint, catalog: EngineCatalog, argv: list[str]
) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """`vllm serve ...` (vllm/entrypoints/cli/main.py): a FlexibleArgumentParser with the serve subparser.

    Errors from the serve flags are reported by the top-level parser (`usage: vllm [-h] [-v] {...} ...`), as
    argparse does for sub-parsers, while `vllm serve --help` shows `usage: vllm serve [model_tag] [options]`.
    """
    top = argparse.ArgumentParser(prog=entry.prog, description="vLLM CLI (spark-llm stand-in)")
    top.add_argument("-v", "--version", action="version", version=catalog.version)
    subcommands = top.add_subparsers(required=False, dest="subparser")
    serve = None
    for name in VLLM_SUBCOMMANDS:
        if name == "serve":
            serve = subcommands.add_parser(name, usage="vllm serve [model_tag] [options]")
            catalog_parser(catalog, parser=serve)
        else:
            subcommands.add_parser(name, add_help=False)
    assert serve is not None
    args = top.parse_args(vllm_flexible_args(top, catalog, argv))
    if args.subparser is None:
        top.print_help()
        raise SystemExit(0)
    if args.subparser != "serve":
        top.error(f"the spark-llm stand-in simulates `vllm serve` only, not `vllm {args.subparser}`")
    return serve, args


def _parse_vllm_api_server(
    entry: EntryPoint, catalog: EngineCatalog, argv: list[str]
) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """`python3 -m vllm.entrypoints.openai.api_server` (the 0.8-era image entry): the same flags, `--model` stays."""
    parser = catalog_parser(catalog, prog=entry.prog)
    return parser, parser.parse_args(vllm_flexible_args(parser, catalog, argv))


def _sglang_module_warning(catalog: EngineCatalog) -> str | None:
    if catalog.version_tuple >= SGLANG_SERVE_POSITIONAL_MODEL_SINCE:
        return (
            "UserWarning: 'python -m sglang.launch_server' is still supported, but 'sglang serve' is the "
            "recommended entrypoint."
        )
    return None


def _vllm_api_server_warning(catalog: EngineCatalog) -> str | None:
    if catalog.version_tuple >= version_key("0.33.0"):
        return (
            "DeprecationWarning: 'python -m vllm.entrypoints.openai.api_server' is deprecated; "
            "use the 'vllm serve' CLI instead."
        )
    return None


ENTRY_POINTS: dict[str, EntryPoint] = {
    "sglang.launch_server": EntryPoint(
        engine="sglang",
        command="python3 -m sglang.launch_server",
        prog="launch_server.py",
        parse=_parse_sglang_launch_server,
        deprecation=_sglang_module_warning,
    ),
    "sglang": EntryPoint(engine="sglang", command="sglang serve", prog="sglang", parse=_parse_sglang_cli),
    "vllm": EntryPoint(engine="vllm", command="vllm serve", prog="vllm", parse=_parse_vllm_cli),
    "vllm.entrypoints.openai.api_server": EntryPoint(
        engine="vllm",
        command="python3 -m vllm.entrypoints.openai.api_server",
        prog="api_server.py",
        parse=_parse_vllm_api_server,
        deprecation=_vllm_api_server_warning,
    ),
}


def entry_point(name: str) -> EntryPoint:
    """A known entry point; an unknown name raises an error that lists the known ones."""
    try:
        return ENTRY_POINTS[name]
    except KeyError:
        raise ValueError(f"unknown entry point {name!r}; known: {', '.join(sorted(ENTRY_POINTS))}") from None


@dataclass(frozen=True)
class ParsedLaunch:
    """A parsed command line: the launch, the catalog it was checked against, and the entry point it came by."""

    config: LaunchConfig
    catalog: EngineCatalog
    entry: EntryPoint


def parse_launch(entry_name: str, argv: Sequence[str], environ: Mapping[str, str] | None = None) -> ParsedLaunch:
    """Parse a real engine's command line; bad or inconsistent flags exit 2 with argparse's usage line.

    The engine version comes from SPARK_LLM_ENGINE_VERSION (default: the newest catalog of the engine).
    """
    environ = os.environ if environ is None else environ
    entry = entry_point(entry_name)
    try:
        catalog = load_catalog(entry.engine, selected_version(entry.engine, environ))
    except CatalogError as error:
        sys.stderr.write(f"{entry.prog}: error: {error}\n")
        raise SystemExit(2) from None
    try:
        # Both engines merge `--config FILE` (YAML) into the command line before parsing it.
        expanded = expand_config_file(list(argv))
    except ConfigFileError as error:
        sys.stderr.write(f"{entry.prog}: error: {error}\n")
        raise SystemExit(2) from None
    try:
        parser, args = entry.parse(entry, catalog, expanded)
    except CommandLineError as error:
        sys.stderr.write(f"{error}\n")
        raise SystemExit(1) from None
    build = _sglang_config if entry.engine == "sglang" else _vllm_config
    try:
        config = build(catalog, args, environ)
    except ValueError as error:
        parser.error(str(error))
    problem = launch_config_problem(config)
    if problem:
        parser.error(problem)
    return ParsedLaunch(config=config, catalog=catalog, entry=entry)


def _value(catalog: EngineCatalog, args: argparse.Namespace, option_string: str, fallback: object = None) -> object:
    """The parsed value of a flag known by any of its spellings; `fallback` when this version lacks the flag."""
    flag = catalog.flag_named(option_string)
    if flag is None:
        return fallback
    return getattr(args, flag.dest)


def _deprecated_set(catalog: EngineCatalog, args: argparse.Namespace) -> tuple[str, ...]:
    return tuple(
        flag.flag for flag in catalog.flags if flag.deprecated and getattr(args, flag.dest, None) != flag.default
    )


def _dist_timeout(flag_value: object, environ: Mapping[str, str]) -> int:
    if flag_value is not None:
        return int(flag_value)
    text = environ.get(DIST_TIMEOUT_ENV, "").strip()
    if text:
        if not text.isdigit():
            raise ValueError(f"{DIST_TIMEOUT_ENV}={text!r} is not a whole number of seconds (e.g. 60)")
        return int(text)
    return DEFAULT_DIST_TIMEOUT_SECONDS


def _api_key(catalog: EngineCatalog, args: argparse.Namespace) -> str | None:
    value = _value(catalog, args, "--api-key")
    # vLLM takes several keys (nargs="+" in newer releases); one is what a deployment sets.
    if isinstance(value, list):
        value = value[0] if value else None
    return str(value) if value else None


def _count(value: object) -> int | None:
    return None if value is None else int(str(value))


def _fraction(value: object) -> float | None:
    return None if value is None else float(str(value))


def _context_length(value: object) -> int:
    return DEFAULT_CONTEXT_LENGTH if value is None or value == -1 else int(value)


def _sglang_config(catalog: EngineCatalog, args: argparse.Namespace, environ: Mapping[str, str]) -> LaunchConfig:
    model_path = str(_value(catalog, args, "--model-path"))
    return LaunchConfig(
        engine="sglang",
        engine_version=catalog.version,
        model_path=model_path,
        served_model_name=str(_value(catalog, args, "--served-model-name") or model_path),
        tp_size=int(_value(catalog, args, "--tp-size", 1)),
        pp_size=int(_value(catalog, args, "--pp-size", 1)),
        nnodes=int(_value(catalog, args, "--nnodes", 1)),
        node_rank=int(_value(catalog, args, "--node-rank", 0)),
        dist_init_addr=_value(catalog, args, "--dist-init-addr"),
        host=str(_value(catalog, args, "--host", "127.0.0.1")),
        port=int(_value(catalog, args, "--port", 30000)),
        headless=False,
        executor_backend=None,
        trust_remote_code=bool(_value(catalog, args, "--trust-remote-code", False)),
        context_length=_context_length(_value(catalog, args, "--context-length")),
        dist_timeout=_dist_timeout(_value(catalog, args, "--dist-timeout"), environ),
        skipped_phases=("graph",) if _value(catalog, args, "--disable-cuda-graph", False) else (),
        deprecated_flags=_deprecated_set(catalog, args),
        memory_fraction=_fraction(_value(catalog, args, "--mem-fraction-static")),
        max_running=_count(_value(catalog, args, "--max-running-requests")),
        metrics=bool(_value(catalog, args, "--enable-metrics", False)),
        api_key=_api_key(catalog, args),
    )


def _vllm_config(catalog: EngineCatalog, args: argparse.Namespace, environ: Mapping[str, str]) -> LaunchConfig:
    model_path = getattr(args, "model_tag", None) or _value(catalog, args, "--model") or VLLM_DEFAULT_MODEL
    served = _value(catalog, args, "--served-model-name")
    served_name = served[0] if isinstance(served, list) and served else served
    nnodes = int(_value(catalog, args, "--nnodes", 1))
    master_addr = str(_value(catalog, args, "--master-addr", "127.0.0.1"))
    master_port = int(_value(catalog, args, "--master-port", 29501))
    host = _value(catalog, args, "--host")
    return LaunchConfig(
        engine="vllm",
        engine_version=catalog.version,
        model_path=str(model_path),
        served_model_name=str(served_name or model_path),
        tp_size=int(_value(catalog, args, "--tensor-parallel-size", 1)),
        pp_size=int(_value(catalog, args, "--pipeline-parallel-size", 1)),
        nnodes=nnodes,
        node_rank=int(_value(catalog, args, "--node-rank", 0)),
        dist_init_addr=join_host_port(master_addr, master_port) if nnodes > 1 else None,
        host=str(host) if host else "0.0.0.0",  # vLLM binds every interface when --host is unset
        port=int(_value(catalog, args, "--port", 8000)),
        headless=bool(_value(catalog, args, "--headless", False)),
        executor_backend=_value(catalog, args, "--distributed-executor-backend"),
        trust_remote_code=bool(_value(catalog, args, "--trust-remote-code", False)),
        context_length=_context_length(_value(catalog, args, "--max-model-len")),
        dist_timeout=_dist_timeout(_value(catalog, args, "--distributed-timeout-seconds"), environ),
        skipped_phases=("compile", "graph") if _value(catalog, args, "--enforce-eager", False) else (),
        deprecated_flags=_deprecated_set(catalog, args),
        memory_fraction=_fraction(_value(catalog, args, "--gpu-memory-utilization")),
        max_running=_count(_value(catalog, args, "--max-num-seqs")),
        metrics=True,
        api_key=_api_key(catalog, args),
    )
