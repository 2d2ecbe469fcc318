"""Fixtures for tests against the simulated cluster with the real pulumi CLI.

The cluster is shared by the whole session (bringing one up costs ~10 s once the images are cached) and taken
down at the end if this session created it. Each deploy test module gets its own Pulumi state backend in a
temp dir, so tests never touch the developer's .pulumi-state.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.schedule import longest_first

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "sim" / "sim"
# Under pytest-xdist (`make integration`: -n N --dist loadfile) every worker has a sim of its own, in a home of its
# own (sim/sim reads $SPARK_LLM_SIM_HOME; every command a test runs inherits it). Alone, the work tree's sim.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
SIM_HOME = REPO / ".sim-workers" / WORKER if WORKER else REPO
if WORKER:
    SIM_HOME.mkdir(parents=True, exist_ok=True)
    os.environ["SPARK_LLM_SIM_HOME"] = str(SIM_HOME)
SIM_DIR = SIM_HOME / ".sim"
SIM_STATE = SIM_DIR / "state.json"
STACK_FILE = SIM_HOME / "Pulumi.sim.yaml"
SIM_IMAGE_TAG = "spark-llm/standin-engine:sim"
PROJECT = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["name"]  # the config namespace of unprefixed keys


def file_backend_url(directory: Path) -> str:
    """Pulumi's file backend in `directory`, as tools/env.sh sets the default one (`metadata=skip`: no `.attrs`
    sidecars, which a killed CLI can leave empty; tools/env.sh says why)."""
    return f"file://{directory}?metadata=skip"


def backend_env(directory: Path) -> dict[str, str]:
    """This environment with a private file backend in `directory` (file_backend_url)."""
    return dict(os.environ, PULUMI_BACKEND_URL=file_backend_url(directory))


# The project files a Pulumi run reads (the program, its packages and the node scripts): what a test that edits them
# copies, so that the edit is its own (project_copy).
PROGRAM_FILES = ("Pulumi.yaml", "__main__.py", "components", "spark_llm", "scripts")


def project_copy(directory: Path) -> Path:
    """A checkout of the program of the test's own in `directory`, as an operator's checkout is:
    a test edits its scripts there and no other test worker's program reads the edit."""
    for name in PROGRAM_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, directory / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, directory / name)
    # Shared, not copied: the venv, and sim/ (the sim stack's model.source.path is relative: sim/standin-model).
    for name in (".venv", "sim"):
        (directory / name).symlink_to(REPO / name)
    return directory


# Where the test bed's time goes: with this variable set (`make integration CMDLOG=/tmp/cmds.jsonl`), every command
# run() runs appends a line: the test, the command's first words, its wall seconds and the CPU seconds of it and its
# descendants on this machine (what the sim's nodes spend on its behalf is not in it). The tier is CPU-bound on two
# cores, so the CPU column is what a faster bed must cut.
CMDLOG = os.environ.get("SPARK_LLM_TEST_CMDLOG")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest test files first (tests/integration/schedule.py): xdist hands them out in this order."""
    items[:] = longest_first(items)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], *, timeout: float = 600, check: bool = True, env: dict | None = None, cwd: Path = REPO):
    started, cpu = time.monotonic(), _children_cpu()
    result = subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env, cwd=cwd
    )
    if CMDLOG:
        words = [Path(cmd[0]).name, *(w for w in cmd[1:3] if not w.startswith("/"))]
        line = {
            "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
            "cmd": " ".join(words),
            "wall_s": round(time.monotonic() - started, 2),
            "cpu_s": round(_children_cpu() - cpu, 2),
            "end": round(time.time(), 1),
        }
        _log_line(line)
    if check and result.returncode != 0:
        # A failed `pulumi up` prints its errors before a long diff of outputs: they lead, the tail follows.
        errors = [line for line in result.stdout.splitlines() if "error" in line.lower()][:40]
        said = "\n".join(errors) + "\n---- the end of its output ----\n" if errors else ""
        raise AssertionError(
            f"{cmd} exited {result.returncode}:\n{said}{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def _log_line(line: dict[str, Any]) -> None:
    with open(str(CMDLOG), "a") as log:
        log.write(json.dumps(line) + "\n")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """With CMDLOG, a line per test phase too: which sim worker ran it, and when (the tier's timeline: a worker left
    alone at the end runs on one of the two cores). Written where the test ran: under xdist the controller gets each
    report again (with `node` set) and skips it."""
    if CMDLOG and not hasattr(report, "node"):
        phase = {"test": report.nodeid, "phase": report.when, "worker": WORKER, "start": round(report.start, 1)}
        _log_line({**phase, "end": round(report.stop, 1), "outcome": report.outcome})


@pytest.fixture(scope="session")
def standin_image() -> Path:
    """The stand-in engine image tarball (built once, cached by recipe)."""
    out = run([str(REPO / "sim" / "engine" / "build-image.sh")], timeout=1200).stdout.strip().splitlines()
    return Path(out[-1])


@dataclass
class SimCluster:
    prefix: str

    def nodes(self) -> list[dict]:
        return yaml.safe_load(STACK_FILE.read_text())["config"]["spark-llm:nodes"]

    def container(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def node_exec(self, node: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A command inside a sim node (test plumbing, not the product's path)."""
        return run(["docker", "exec", self.container(node), *cmd], check=check, timeout=120)

    def fabric_address(self, node: str) -> str:
        return next(n["fabricAddress"] for n in self.nodes() if n["name"] == node)

    def started_at(self, node: str, container: str = "spark-llm-engine") -> str:
        """When the node's engine container started (RFC 3339, nanoseconds: compares as text)."""
        return self.node_exec(node, "docker", "inspect", "-f", "{{.State.StartedAt}}", container).stdout.strip()

    def engine_log(self, node: str, container: str = "spark-llm-engine") -> str:
        return self.node_exec(node, "docker", "logs", container).stdout

    def resize(self, workers: int, image: Path) -> None:
        run(
            [
                str(SIM),
                "up",
                "--workers",
                str(workers),
                "--load-image",
                str(image),
                # As a user starts: the image on the head only; the program transfers it to the workers.
                "--load-on",
                "head",
                "--image-tag",
                SIM_IMAGE_TAG,
            ],
            timeout=1200,
        )


def tcp_connect(address: str, port: int) -> str:
    """What a TCP connection from this machine (the operator's side) gets: `open`, `refused`, or the error's name."""
    try:
        with socket.create_connection((address, port), timeout=5):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except OSError as error:
        return type(error).__name__


def complete(outputs: dict, prompt: str = "hello", max_tokens: int = 4, api_key: str | None = None) -> dict:
    """One completion from the deployed endpoint, as a client would ask for it."""
    body = json.dumps({"model": outputs["model"], "prompt": prompt, "max_tokens": max_tokens}).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(outputs["endpoint"] + "/v1/completions", body, headers)
    with urllib.request.urlopen(req, timeout=20) as response:
        return json.load(response)


@pytest.fixture(scope="session")
def sim_cluster(standin_image: Path) -> Iterator[SimCluster]:
    created = not SIM_STATE.exists()
    cluster = SimCluster(prefix="")
    cluster.resize(1, standin_image)
    cluster.prefix = json.loads(SIM_STATE.read_text())["prefix"]
    yield cluster
    if created:
        run([str(SIM), "down"], timeout=300)


# Commands that read the stack's config: they get the test's private copy of Pulumi.sim.yaml.
CONFIG_COMMANDS = {"up", "preview", "destroy", "refresh", "config"}


@dataclass
class Pulumi:
    """The real pulumi CLI on the sim stack, with a private state backend and a private copy of the config."""

    env: dict[str, str]
    config_file: Path
    stack: str = "sim"
    cwd: Path = REPO  # the project it runs: the work tree, or a test's project_copy
    _outputs: dict = field(default_factory=dict, repr=False)
    _outputs_stamp: list = field(default_factory=list, repr=False)

    @property
    def backend_dir(self) -> Path:
        """The directory of its file backend (file_backend_url's)."""
        return Path(self.env["PULUMI_BACKEND_URL"].removeprefix("file://").split("?")[0])

    def __call__(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        extra = ["--config-file", str(self.config_file)] if args and args[0] in CONFIG_COMMANDS else []
        cmd = ["pulumi", *args, "--stack", self.stack, "--non-interactive", *extra]
        return run(cmd, env=self.env, check=check, timeout=timeout, cwd=self.cwd)

    def set(self, path: str, value: str) -> None:
        """`pulumi config set --path PATH VALUE` on the private config copy, written as that command writes it (one
        CLI start less per key: 0.25 s of CPU each, 130 times a run)."""
        document = yaml.safe_load(self.config_file.read_text()) or {}
        set_config_path(document.setdefault("config", {}), path, value)
        self.config_file.write_text(yaml.safe_dump(document, sort_keys=False))

    def reset_config(self) -> None:
        """Back to the config `sim up` wrote (with this stack's secrets salt)."""
        private_config(self.config_file)

    def model_path(self) -> str:
        """spark-llm:model.path in this stack's config."""
        return yaml.safe_load(self.config_file.read_text())["config"]["spark-llm:model"]["path"]

    def use_head_weights(self, path: str) -> None:
        """The sim's config, serving weights that are already on the head at `path` (kind head)."""
        self.reset_config()
        self.set("model.path", path)
        self.set("model.source.kind", "head")
        self.set("model.source.path", path)

    def start_up(self, **popen: Any) -> subprocess.Popen[str]:
        """`pulumi up --yes` in the background: its output on a pipe (stderr merged unless `popen` says else)."""
        cmd = ["pulumi", "up", "--yes", "--skip-preview", "--stack", self.stack, "--non-interactive"]
        cmd += ["--config-file", str(self.config_file)]
        options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
        return subprocess.Popen(cmd, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, **(options | popen))

    def up(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self("up", "--yes", "--skip-preview", *args, check=check)

    def outputs(self) -> dict:
        """`pulumi stack output --json --show-secrets`, read again only when the stack's state file changed."""
        stamp = [(f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in self.state_files()]
        if not stamp or stamp != self._outputs_stamp:
            self._outputs = json.loads(self("stack", "output", "--json", "--show-secrets").stdout)
            self._outputs_stamp = stamp
        return copy.deepcopy(self._outputs)  # a test may change what it got

    def state_files(self) -> list[Path]:
        """The stack's checkpoint in the file backend (every up, refresh and destroy rewrites it)."""
        return sorted(self.backend_dir.glob(f".pulumi/stacks/*/{self.stack}.json*"))


def set_config_path(config: dict, path: str, value: str) -> None:
    """Pulumi's `config set --path`: `a.b[0].c` under the project's namespace unless the first part names one
    (`spark-llm:image.ref`), maps and lists made on the way, and the value typed as the CLI types it: `true` and
    `false` as booleans, a canonical integer as a number, anything else as text."""
    parts = [p for p in re.split(r"\.|\[(\d+)\]", path) if p]
    key = parts[0] if ":" in parts[0] else f"{PROJECT}:{parts[0]}"
    steps: list[str | int] = [key, *(int(p) if p.isdigit() else p for p in parts[1:])]
    typed: object = value
    if value in ("true", "false"):
        typed = value == "true"
    elif re.fullmatch(r"-?[1-9]\d*|0", value):
        typed = int(value)
    node: Any = config
    for step, after in zip(steps, steps[1:], strict=False):
        empty: Any = [] if isinstance(after, int) else {}
        if isinstance(step, int):
            node.extend(None for _ in range(step + 1 - len(node)))
            node[step] = node[step] if node[step] is not None else empty
        else:
            node.setdefault(step, empty)
        node = node[step]
    last = steps[-1]
    if isinstance(last, int):
        node.extend(None for _ in range(last + 1 - len(node)))
    node[last] = typed


@contextmanager
def project_stack_file_lock() -> Iterator[None]:
    """Under pytest-xdist, one worker at a time writes the work tree's own Pulumi.sim.yaml (`pulumi stack init`
    puts its salt there; `make demo` runs the work tree's sim, which rewrites it)."""
    with open(SIM_HOME.parent / "stack-file.lock" if WORKER else os.devnull, "w") as lock:
        if WORKER:
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@contextmanager
def as_the_project_stack_file(cli: Pulumi) -> Iterator[None]:
    """The test's private config in the project's Pulumi.<stack>.yaml, where a user's own stack file is (a command
    the program prints, such as `spark-llm exec --stack sim ...`, reads it there); put back afterwards."""
    target = REPO / f"Pulumi.{cli.stack}.yaml"
    with project_stack_file_lock():
        saved = target.read_text() if target.exists() else None
        target.write_text(cli.config_file.read_text())
        try:
            yield
        finally:
            if saved is None:
                target.unlink(missing_ok=True)
            else:
                target.write_text(saved)


def private_config(config_file: Path, project: Path = REPO) -> None:
    """The sim's stack file, with this stack's secrets settings (its salt): those the private copy has already,
    else those `pulumi stack init` just kept in the project's own Pulumi.sim.yaml (where init writes them, whatever
    the sim's home)."""
    document = yaml.safe_load(STACK_FILE.read_text()) or {}
    # The supervisor is on by default; the tests turn it on where their story needs it (test_supervisor,
    # test_router, test_upgrade). Elsewhere a member stopped by hand must stay stopped for preview to report it, and
    # the tests that do not need it do not pay for its steps. `config rm supervisor` gives a test the default.
    document.setdefault("config", {}).setdefault(f"{PROJECT}:supervisor", {"enabled": False})
    source = config_file if config_file.exists() else project / "Pulumi.sim.yaml"
    if source != STACK_FILE and source.exists():
        kept = yaml.safe_load(source.read_text()) or {}
        document.update({k: v for k, v in kept.items() if k != "config"})
    config_file.write_text(yaml.safe_dump(document, sort_keys=False))


@contextmanager
def sim_stack(env: dict[str, str], config_dir: Path, project: Path = REPO) -> Iterator[Pulumi]:
    """Stack `sim` of `project` (the work tree or a project_copy) on the backend env names, with a private copy of
    the config in config_dir; destroyed after."""
    config_file = config_dir / "Pulumi.sim.yaml"
    # One init at a time across the test workers: each writes its salt into the work tree's Pulumi.sim.yaml, and the
    # copy must carry the salt its own init wrote (or kept). A project copy has a stack file of its own.
    with project_stack_file_lock() if project == REPO else contextlib.nullcontext():
        run(["pulumi", "stack", "init", "sim", "--non-interactive"], env=env, cwd=project)
        private_config(config_file, project)
    cli = Pulumi(env=env, config_file=config_file, cwd=project)
    yield cli
    # Leave no engine running for the next module: destroy what this module deployed.
    cli("destroy", "--yes", "--skip-preview", check=False)
    # Keep Pulumi.sim.yaml: `sim up` wrote it for the whole session, and the next module's stack reads it.
    run(
        ["pulumi", "stack", "rm", "sim", "--yes", "--force", "--preserve-config", "--non-interactive"],
        env=env,
        check=False,
        cwd=project,
    )


@contextmanager
def module_stack(tmp_path_factory: pytest.TempPathFactory, project: Path = REPO) -> Iterator[Pulumi]:
    """A test module's sim stack of `project` on a private backend (sim_stack)."""
    backend = tmp_path_factory.mktemp("pulumi-state")
    with sim_stack(backend_env(backend), backend, project) as cli:
        yield cli


@pytest.fixture(scope="module")
def pulumi(sim_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pulumi]:
    with module_stack(tmp_path_factory) as cli:
        yield cli


def descendants(pid: int) -> list[int]:
    """Every process below pid (a CLI's language host, program and providers)."""
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    children = [int(child) for child in found]
    return children + [grandchild for child in children for grandchild in descendants(child)]


def ctrl_c(pulumi: Pulumi, args: list[str], after_s: float, at_lock: bool = False) -> None:
    """`spark-llm ARGS` as a terminal runs it (a process group of its own), Ctrl-C `after_s` in (SIGINT to the
    group); it ends with 130 and leaves no lock, no pending operation and no process behind (issue 31, 3).
    `at_lock`: the Ctrl-C comes as soon as the stack's lock file appears instead (within `after_s`): Pulumi takes
    the lock before it sets its SIGINT handler, and a Ctrl-C then ends it outright (its lock left, before spark-llm
    released it)."""
    cmd = [sys.executable, "-m", "spark_llm.ops.cli", *args]
    proc = subprocess.Popen(
        cmd, env=pulumi.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    seen: set[int] = set()
    pressed = time.monotonic() + after_s
    locks = pulumi.backend_dir / ".pulumi" / "locks"
    while proc.poll() is None and time.monotonic() < pressed:
        seen.update(descendants(proc.pid))
        if at_lock and any(locks.glob("**/*.json")):
            break
        time.sleep(0.01 if at_lock else 0.1)
    if at_lock:
        assert any(locks.glob("**/*.json")), f"no lock within {after_s} s: {proc.communicate()[0][-3000:]}"
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    os.killpg(proc.pid, signal.SIGINT)
    while proc.poll() is None:
        seen.update(descendants(proc.pid))
        time.sleep(0.1)
    said = proc.communicate(timeout=300)[0]
    assert proc.returncode == 130, said[-3000:]
    assert "interrupted" in said and "Traceback" not in said, said[-3000:]

    def alive() -> list[str]:
        running = []
        for pid in seen:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                # A zombie (state Z: ended, not yet reaped by its new parent) is not left running.
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    running.append(Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " "))
        return running

    # Pulumi has ended; its plugins end as it shuts them down (SIGINT, then SIGKILL after 5 s), and when a SIGINT
    # ended pulumi before it set its handler, spark-llm ends them the same way (spark_llm/ops/left_behind.py): 30 s
    # is a bound with three test workers on two cores; a plugin nobody ends runs on for its 5-minute health check.
    deadline = time.monotonic() + 30
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(), f"left running 30 s after Ctrl-C: {alive()}"
    assert not list(pulumi.backend_dir.glob(".pulumi/locks/**/*.json")), said[-3000:]
    assert not json.loads(pulumi("stack", "export").stdout)["deployment"].get("pending_operations")


def assert_group_serves(pulumi: Pulumi, sim: SimCluster) -> dict:
    """What every fault test asserts after recovery: each node runs exactly one engine container, each node's
    weights manifest is the stack's digest, every worker started before the head, and a completion is served.
    Returns the stack's outputs."""
    outputs = pulumi.outputs()
    manifest = f"{pulumi.model_path()}/.spark-llm-manifest.json"
    nodes = [n["name"] for n in sim.nodes()]
    for node in nodes:
        ps = sim.node_exec(node, "docker", "ps", "-a", "--filter", "name=^spark-llm-engine$", "--format", "{{.State}}")
        assert ps.stdout.split() == ["running"], (node, ps.stdout)
        digest = json.loads(sim.node_exec(node, "cat", manifest).stdout)["digest"]
        assert digest == outputs["weights_manifest_digest"], node
    head_started = sim.started_at("head")
    assert all(sim.started_at(n) < head_started for n in nodes if n != "head")
    assert complete(outputs)["usage"]["completion_tokens"] == 4
    return outputs
