"""Pulumi's LanguageRuntime protocol for Python programs, served for the `pulumi` CLI built in tools/.

Why this exists: Pulumi's own Go language host (module
github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is refused by the Go module proxy here
(HTTP 403 "This module version is not available" for every version, see tools/README.md), so it cannot be
built. This host speaks the same gRPC protocol with the Python SDK's generated stubs and runs the program the
way Pulumi's host does: `python -u pulumi-language-python-exec --monitor ... PROGRAM` (Pulumi's own runner,
taken from the sdk/v3 module that the proxy does serve), with config passed in PULUMI_CONFIG.
It implements what `pulumi preview/up/destroy/about` call; the rest answers UNIMPLEMENTED, which the CLI
treats as an older host.

Usage (by the CLI, not by people): pulumi-language-python [flags...] ENGINE_ADDRESS
Prints the port it listens on, as every Pulumi plugin must.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from concurrent import futures
from pathlib import Path

import grpc
import pulumi
from google.protobuf import empty_pb2
from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2

# Exit code Pulumi's runner uses after it has already shown the user an actionable message.
BAIL_EXIT_CODE = 32
EXEC_NAME = "pulumi-language-python-exec"


def _find_exec() -> str:
    """Pulumi's program runner: beside the CLI (tools/build-pulumi.sh installs it there) or on PATH."""
    found = shutil.which(EXEC_NAME)
    if found:
        return found
    pulumi_cli = shutil.which("pulumi")
    if pulumi_cli:
        candidate = Path(pulumi_cli).resolve().parent / EXEC_NAME
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError(f"{EXEC_NAME} not found on PATH or beside the pulumi CLI; run `make tools`")


def _python_for(info: language_pb2.ProgramInfo) -> str:
    """The interpreter named by the `virtualenv` runtime option, else the one running this host."""
    options = dict(info.options) if info.options else {}
    venv = options.get("virtualenv")
    if venv:
        root = Path(info.root_directory or ".")
        venv_path = Path(str(venv)) if os.path.isabs(str(venv)) else root / str(venv)
        python = venv_path / "bin" / "python"
        if not python.exists():
            raise FileNotFoundError(
                f"Pulumi.yaml runtime option virtualenv={venv!r}: {python} does not exist; run `make tools`"
            )
        return str(python)
    return sys.executable


class LanguageHost(language_pb2_grpc.LanguageRuntimeServicer):
    """Runs Pulumi Python programs for the engine at `engine_address`."""

    def __init__(self, engine_address: str) -> None:
        self.engine_address = engine_address

    def GetPluginInfo(self, request, context):  # noqa: N802 (gRPC method names)
        return plugin_pb2.PluginInfo(version=pulumi.__version__ if hasattr(pulumi, "__version__") else "")

    def GetRequiredPlugins(self, request, context):  # noqa: N802
        # Providers are either bundled with the CLI (the dynamic-provider host) or installed by `make tools`.
        return language_pb2.GetRequiredPluginsResponse()

    def GetRequiredPackages(self, request, context):  # noqa: N802
        return language_pb2.GetRequiredPackagesResponse()

    def About(self, request, context):  # noqa: N802
        python = _python_for(request.info) if request.HasField("info") else sys.executable
        version = subprocess.run(
            [python, "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        return language_pb2.AboutResponse(executable=python, version=version)

    def GetProgramDependencies(self, request, context):  # noqa: N802
        python = _python_for(request.info)
        out = subprocess.run(
            [python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        deps = [language_pb2.DependencyInfo(name=d["name"], version=d["version"]) for d in json.loads(out or "[]")]
        return language_pb2.GetProgramDependenciesResponse(dependencies=deps)

    def Run(self, request, context):  # noqa: N802
        info = request.info
        program = info.program_directory or request.program or "."
        args = [
            _python_for(info),
            "-u",
            _find_exec(),
            "--monitor",
            request.monitor_address,
            "--engine",
            self.engine_address,
            "--project",
            request.project,
            "--stack",
            request.stack,
            "--pwd",
            request.pwd,
            "--dry_run",
            "true" if request.dryRun else "false",
            "--parallel",
            str(request.parallel),
            "--organization",
            request.organization,
            "--root_directory",
            info.root_directory or request.pwd,
            program,
            *request.args,
        ]
        env = dict(os.environ)
        env["PULUMI_CONFIG"] = json.dumps(dict(request.config))
        env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(request.configSecretKeys))
        # The program's output goes where Pulumi's host sends it: to this plugin's own stdout/stderr,
        # which the CLI shows as the stack's diagnostics.
        proc = subprocess.run(args, env=env, cwd=request.pwd or None, check=False)
        if proc.returncode == 0:
            return language_pb2.RunResponse()
        if proc.returncode == BAIL_EXIT_CODE:
            return language_pb2.RunResponse(bail=True)
        return language_pb2.RunResponse(error=f"Program exited with non-zero exit code: {proc.returncode}")

    def InstallDependencies(self, request, context):  # noqa: N802
        # Dependencies are installed by `make tools` into the pinned venv; nothing to do here.
        return iter(())

    def Cancel(self, request, context):  # noqa: N802
        return empty_pb2.Empty()


def main(argv: list[str]) -> int:
    positional = [a for a in argv if not a.startswith("-")]
    if not positional:
        print("Usage: pulumi-language-python [flags] ENGINE_ADDRESS", file=sys.stderr)
        return 2
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)],
    )
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageHost(positional[-1]), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    # The CLI interrupts its plugins when it is done: that is a normal exit, not a crash.
    signal.signal(signal.SIGINT, lambda *_: server.stop(grace=1))
    signal.signal(signal.SIGTERM, lambda *_: server.stop(grace=1))
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
