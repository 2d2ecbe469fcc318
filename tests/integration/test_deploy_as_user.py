"""Deploying needs no root: a user without it installs the deploy path in a fresh clone and deploys (issue 14, item 8).

User story: an operator on their own account (not root, no sudo, not in the docker group) who has the official
Pulumi CLI and its two plugins in their home (`~/.pulumi`, where Pulumi's installer and `pulumi plugin install`
put them) and their own ssh key (`~/.ssh/id_ed25519`, the default `sshKeyPath`) clones the repository, runs
`make deploy-tools`, then `pulumi stack init sim` and `pulumi up --stack sim` on the checkout's own state backend.
The endpoint serves a completion, `pulumi destroy` stops the engines, and nothing the user ran wrote outside their
home and the clone except ssh's connection-sharing sockets in /tmp.

The CLI and plugins are the ones this machine already has (built once by `make tools`; CI builds nothing twice):
copied into the user's home as the official installer would lay them out. The clone is of this checkout's HEAD
commit (uncommitted changes are not in it). It deploys to the session's sim and destroys what it deployed, as the
other deploy tests do; the user, its home and its files are removed afterwards.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import REPO, STACK_FILE, SimCluster, complete, run

pytestmark = pytest.mark.integration

# Where a process of an unprivileged user may leave files outside its home: the temp dirs (cleaned up after).
TEMP_DIRS = ("/tmp/", "/var/tmp/", "/dev/shm/")
# ssh's ControlPath directory and its sockets (spark_llm/remote/ssh.py), in the temp dir: the user's own (masters
# kept for the next run), or a run's private one.
SSH_CONTROL = re.compile(r"/tmp/spark-llm-(masters-\d+|ssh-ctl-[^/]+)(/[^/]+)?")
# What the user's environment keeps from this one: how this machine reaches PyPI (a mirror, a proxy, a CA).
PASSED_ENV = re.compile(r"PIP_\w+|(?i:https?_proxy|no_proxy)|REQUESTS_CA_BUNDLE|SSL_CERT_FILE")


def _pins() -> dict[str, str]:
    text = (REPO / "tools" / "versions.env").read_text()
    return dict(re.findall(r"^([A-Z_]+)=(\S+)$", text, re.M))


@dataclass
class DeployUser:
    """A fresh account without root, its clone of the repository, and how to run a command as it."""

    name: str
    uid: int
    gid: int
    home: Path

    @property
    def clone(self) -> Path:
        return self.home / "spark-llm"

    def env(self) -> dict[str, str]:
        """A login's environment: the official CLI's ~/.pulumi/bin on PATH (its installer's line in ~/.bashrc), no
        Go, nothing of root's (no PULUMI_HOME, no cache dirs)."""
        env = {k: v for k, v in os.environ.items() if PASSED_ENV.fullmatch(k)}
        return env | {
            "HOME": str(self.home),
            "USER": self.name,
            "LOGNAME": self.name,
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            "PATH": f"{self.home}/.pulumi/bin:/usr/local/bin:/usr/bin:/bin",
        }

    def run(self, *cmd: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
        """cmd as this user (its uid, its own group only), in the clone."""
        result = subprocess.run(
            cmd,
            cwd=self.clone,
            env=self.env(),
            user=self.uid,
            group=self.gid,
            extra_groups=[],
            umask=0o022,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"as {self.name}: {cmd} exited {result.returncode}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            )
        return result

    def pulumi(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`pulumi ARGS --stack sim` in the clone after `. tools/env.sh`, as the README says."""
        argv = ["pulumi", *args, "--stack", "sim", "--non-interactive"]
        return self.run("bash", "-c", '. tools/env.sh && exec "$@"', "pulumi", *argv, timeout=timeout, check=check)

    def files_outside_home(self) -> list[str]:
        """Every file on this machine that the user owns, outside its home: a process without root creates files
        owned by itself, so this is everything it wrote elsewhere. Not searched: /proc, /sys, and the sim nodes'
        disks under /var/lib/docker (root's only, so the user cannot write there; they are the deploy target, and
        rsync run by a node's root keeps the uploader's uid on the weights it receives). Nor any directory the user
        may not enter (not its own, not its group's, no execute bit for others, as root's home): nothing below it
        can be the user's (root's home alone holds most of this machine's files: 25 s of find, now a few)."""
        uid, gid = str(self.uid), str(self.gid)
        closed = ["(", "-type", "d", "!", "-perm", "-o=x", "!", "-user", uid, "!", "-group", gid, ")"]
        pruned = ["-path", "/proc", "-o", "-path", "/sys", "-o", "-path", "/var/lib/docker", "-o", *closed]
        find = ["find", "/", "/dev/shm", "-xdev", "(", *pruned, ")", "-prune", "-o", "-user", uid, "-print"]
        found = run(find, check=False, timeout=300).stdout.split("\n")
        return sorted(p for p in found if p and p != str(self.home) and not p.startswith(f"{self.home}/"))

    def temp_files(self) -> list[Path]:
        """The user's entries in the temp dirs (a quick look, for the clean-up)."""
        find = ["find", *TEMP_DIRS, "-xdev", "-user", str(self.uid), "-print"]
        return [Path(p) for p in run(find, check=False, timeout=60).stdout.splitlines()]

    def processes(self) -> list[int]:
        """The user's running processes (ssh masters outlive a run by ControlPersist)."""
        found = run(["pgrep", "-u", str(self.uid)], check=False).stdout.split()
        return [int(pid) for pid in found]


def _give_official_tools(user: DeployUser) -> None:
    """This machine's Pulumi CLI (with its language host beside it) and the two pinned providers, laid out in the
    user's home as Pulumi's installer and `pulumi plugin install` do: ~/.pulumi/bin and ~/.pulumi/plugins."""
    cli = shutil.which("pulumi")
    assert cli, "no pulumi on PATH: run . tools/env.sh (make tools builds it)"
    # Only Pulumi's files: an official CLI may sit in a directory shared with other programs (/usr/local/bin).
    bin_dir = user.home / ".pulumi" / "bin"
    bin_dir.mkdir(parents=True)
    for program in Path(cli).parent.glob("pulumi*"):
        shutil.copy2(program, bin_dir / program.name)
    pins = _pins()
    plugins = Path(os.environ.get("PULUMI_HOME", Path.home() / ".pulumi")) / "plugins"
    for name, version in (("command", pins["COMMAND_VERSION"]), ("docker", pins["DOCKER_VERSION"])):
        shutil.copytree(
            plugins / f"resource-{name}-v{version}", user.home / ".pulumi" / "plugins" / f"resource-{name}-v{version}"
        )
    run(["chown", "-R", f"{user.uid}:{user.gid}", str(user.home / ".pulumi")])


def _give_key_and_stack(user: DeployUser) -> None:
    """The user's own ssh key (a copy of the sim's operator key, 0600 in ~/.ssh) and their stack file: the sim's
    node list and settings, with the default sshKeyPath (~/.ssh/id_ed25519) and no other stack's secrets salt."""
    ssh = user.home / ".ssh"
    ssh.mkdir(mode=0o700)
    config = yaml.safe_load(STACK_FILE.read_text())["config"]
    shutil.copyfile(config.pop("spark-llm:sshKeyPath"), ssh / "id_ed25519")
    (ssh / "id_ed25519").chmod(0o600)
    stack_file = user.clone / "Pulumi.sim.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    for path in (ssh, ssh / "id_ed25519", stack_file):
        os.chown(path, user.uid, user.gid)


def _remove(user: DeployUser) -> None:
    """End what the user left running (ssh masters linger for ControlPersist), then the account, its home and its
    entries in the temp dirs. Anything else it owns is left for the test's assertion to name: never deleted
    blindly (deleting from under a running container's overlay once broke a sim node)."""
    deadline = time.monotonic() + 30
    while (pids := user.processes()) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(0.2)  # poll interval of the bounded wait above, not a wait on a condition
    assert not user.processes(), f"{user.name}'s processes outlived SIGTERM for 30 s"
    temp = user.temp_files()
    run(["userdel", "--remove", user.name], check=False)
    for path in sorted(temp, key=lambda p: len(p.parts), reverse=True):  # deepest first
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


@pytest.fixture
def deploy_user(sim_cluster: SimCluster) -> Iterator[DeployUser]:
    """A new account without root, with the official CLI and plugins, its own key and a fresh clone."""
    if os.geteuid() != 0:
        pytest.skip("creating a user needs root (CI runs make test as root)")
    name = f"sl-deploy-{secrets.token_hex(3)}"
    run(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash", name])
    entry = pwd.getpwnam(name)
    user = DeployUser(name=name, uid=entry.pw_uid, gid=entry.pw_gid, home=Path(entry.pw_dir))
    try:
        # Cloned by root and handed over: the checkout under test may sit where the user cannot read it. No
        # hardlinks: the chown below would otherwise reach the checkout's own object files.
        run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(user.clone)])
        run(["chown", "-R", f"{user.uid}:{user.gid}", str(user.clone)])
        _give_official_tools(user)
        _give_key_and_stack(user)
        yield user
    finally:
        _remove(user)


def test_a_user_without_root_installs_the_deploy_path_and_deploys_to_the_sim(
    deploy_user: DeployUser, sim_cluster: SimCluster
):
    user = deploy_user
    # The user cannot have used root: its own uid and group only (no sudo, no docker group), no sudo that lets
    # it in, no access to the Docker engine's socket (root's equal) nor to root's home (root's toolchain).
    assert user.run("id", "-u").stdout.strip() == str(user.uid) != "0"
    assert user.run("id", "-G").stdout.split() == [str(user.gid)]
    assert user.run("bash", "-c", "sudo -n true", check=False).returncode != 0  # 127 where sudo is absent
    assert user.run("test", "-w", "/var/run/docker.sock", check=False).returncode != 0
    assert user.run("test", "-r", str(Path.home() / ".pulumi"), check=False).returncode != 0

    started = time.monotonic()
    tools = user.run("make", "deploy-tools", timeout=900)
    tools_seconds = time.monotonic() - started
    out = tools.stdout + tools.stderr
    # The official CLI in the user's home is used as it is; nothing is built (no Go on its PATH), nothing
    # system-wide is touched (no apt-get: tools/system-deps.sh is the developers' path).
    assert f"at {user.home}/.pulumi/bin/pulumi" in out, out
    assert "system-deps" not in out and "apt-get" not in out, out
    assert not re.search(r"\bbuil(t|ding)\b", out), out
    # The clone's venv, the user's, with what the program needs only: no test or lint tools.
    assert (user.clone / ".venv" / ".deploy-installed").stat().st_uid == user.uid
    assert not any((user.clone / ".venv" / "bin" / tool).exists() for tool in ("pytest", "mypy", "ruff"))

    # The weights go up from this user's machine (the sim's stack uploads them): none on the nodes before.
    model_path = yaml.safe_load(STACK_FILE.read_text())["config"]["spark-llm:model"]["path"]
    for node in (n["name"] for n in sim_cluster.nodes()):
        sim_cluster.node_exec(node, "rm", "-rf", model_path)
    user.pulumi("stack", "init")
    try:
        started = time.monotonic()
        up = user.pulumi("up", "--yes", "--skip-preview")
        up_seconds = time.monotonic() - started
        assert re.search(r"\d+ created", up.stdout), up.stdout
        outputs = json.loads(user.pulumi("stack", "output", "--json", "--show-secrets").stdout)
        assert complete(outputs)["usage"]["completion_tokens"] == 4
        # The weights it uploaded belong to each node's login user (root here), not to the workstation's uid:
        # another account of the node with that uid must not be able to rewrite them.
        for node in (n["name"] for n in sim_cluster.nodes()):
            foreign = sim_cluster.node_exec(
                node, "find", model_path, "(", "!", "-uid", "0", "-o", "!", "-gid", "0", ")"
            )
            assert foreign.stdout == "", (node, foreign.stdout[:500])
        # Its own state backend: the checkout's, written by the user.
        states = list((user.clone / ".pulumi-state").glob(".pulumi/stacks/**/sim.json"))
        assert states and all(s.stat().st_uid == user.uid for s in states), states
        # ...and, as tools/env.sh sets it up, no `.attrs` sidecars: a killed CLI could leave one empty, and the stack
        # would then fail every command with "failed to load checkpoint: EOF".
        assert not list((user.clone / ".pulumi-state").glob("**/*.attrs"))
    finally:
        started = time.monotonic()
        destroy = user.pulumi("destroy", "--yes", "--skip-preview", check=False)
        destroy_seconds = time.monotonic() - started
    assert destroy.returncode == 0, destroy.stdout + destroy.stderr
    # The session's sim is left as the other deploy tests leave it: no engine on any node.
    for node in (n["name"] for n in sim_cluster.nodes()):
        ps = sim_cluster.node_exec(node, "docker", "ps", "-aq", "--filter", "name=^spark-llm-engine$")
        assert ps.stdout.strip() == "", node
    print(f"make deploy-tools {tools_seconds:.1f} s, pulumi up {up_seconds:.1f} s, destroy {destroy_seconds:.1f} s")

    # Nothing the deploy path ran wrote outside the user's home (the clone is in it), except ssh's
    # connection-sharing sockets in the temp dir (spark_llm/remote/ssh.py).
    outside = user.files_outside_home()
    print("written outside the user's home:", outside)
    assert [p for p in outside if not SSH_CONTROL.match(p)] == [], outside
