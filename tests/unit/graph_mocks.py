"""Pulumi mocks for the whole program: run __main__.py and record what the engine would be told.

A MockMonitor subclass records every RegisterResource request, so tests assert types, parents, depends_on edges,
delete_before_replace, triggers, labels and secrets. Nothing reaches a node: components.bootstrap does not look at
the nodes under mocks, and the stacks' addresses are real machines elsewhere.
"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import tempfile
from pathlib import Path

import pulumi
import yaml
from google.protobuf import json_format
from pulumi.runtime.mocks import MockMonitor

from components import bootstrap as stack
from tests.conftest import HEAD_KEY, WORKER_KEY

ROOT = Path(__file__).resolve().parents[2]
SECRET_SIG = "4dabf18193072939515e22adb298388d"
IMAGE_ID = "sha256:" + "c" * 64
WEIGHTS_DIGEST = "ab" * 32
# What the mocked Ray token step prints (components/launch_scripts.py makes a random one).
RAY_TOKEN = "5a" * 32
# What the mocked supervisor's key step prints (components/supervisor.py makes a key pair on the head).
SUPERVISOR_PUBLIC_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeFakeFakeFakeFakeFakeFakeFakeFakeFakeFake spark-llm-supervisor@dual-spark"
)
# What the mocked program reads as ~/.ssh/id_ed25519 (the stacks' sshKeyPath): not a usable key, only its shape.
FAKE_PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nc3BhcmstbGxtIHRlc3Qga2V5\n-----END OPENSSH PRIVATE KEY-----\n"


class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        outs = dict(args.inputs)
        if args.typ == "docker:index/remoteImage:RemoteImage":
            outs["imageId"] = IMAGE_ID
        elif args.name.endswith("-ray-token") and args.typ == "command:local:Command":
            outs["stdout"] = RAY_TOKEN
        elif re.fullmatch(r"spark(-[a-z0-9-]+)?-supervisor-key", args.name):  # the stack's, or one model's
            outs["stdout"] = SUPERVISOR_PUBLIC_KEY + "\n"
        elif re.match(r"spark(-[a-z0-9-]+)?-weights-", args.name):
            outs["stdout"] = f"copied\nspark-llm-manifest {WEIGHTS_DIGEST} 3 1024\n"
        return [f"{args.name}-id", outs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks):
        super().__init__(mocks)
        self.requests = []

    def RegisterResource(self, request):  # noqa: N802 (gRPC name)
        self.requests.append(request)
        return super().RegisterResource(request)


def inputs(request) -> dict:
    return json_format.MessageToDict(request.object)


def without_secrets(value):
    """The inputs with every Pulumi secret's value left out: what state would hold in plaintext."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG):
            return "[secret]"
        return {k: without_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    return value


def dual_spark_stack_file() -> dict:
    """Pulumi.dual-spark.yaml as committed, keys without the namespace."""
    raw = yaml.safe_load((ROOT / "Pulumi.dual-spark.yaml").read_text())["config"]
    return {k.split(":", 1)[1]: v for k, v in raw.items()}


def pinned(raw: dict) -> dict:
    """What an operator does before the first `up`: pin the nodes' real host keys (from ssh-keyscan)."""
    raw["nodes"][0]["hostKey"], raw["nodes"][1]["hostKey"] = HEAD_KEY, WORKER_KEY
    return raw


def register(monkeypatch, raw: dict, secrets: tuple[str, ...] = (), observations: dict | None = None) -> dict:
    """Run __main__.py for `raw` under mocks; return {name: RegisterResource request}.

    `secrets` are the keys given as Pulumi secrets. HOME is a temp dir holding a fake ~/.ssh/id_ed25519.
    `observations` stands for what spark_llm.remote.observe would have read on the nodes (None: not observed, as
    components.bootstrap does under mocks); the nodes themselves are never reached.
    """
    monkeypatch.setattr(stack, "observe_nodes", lambda plan, extras: [observations for _ in extras])
    home = Path(tempfile.mkdtemp(prefix="spark-llm-graph-"))
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text(FAKE_PRIVATE_KEY)
    (home / ".ssh" / "id_ed25519").chmod(0o600)  # as ssh-keygen leaves it: the program refuses a key others read
    monkeypatch.setenv("HOME", str(home))
    monitor = RecordingMonitor(Mocks())
    pulumi.runtime.set_mocks(Mocks(), project="spark-llm", stack="dual-spark", preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(
        {f"spark-llm:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()},
        [f"spark-llm:{k}" for k in secrets],
    )
    monkeypatch.chdir(ROOT)

    @pulumi.runtime.test
    def run():
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")

    try:
        run()
    finally:
        shutil.rmtree(home, ignore_errors=True)  # a fake private key must not outlive the test in /tmp
    return {r.name: r for r in monitor.requests}


def label(request, name: str):
    """The value of a docker.Container's label `name` in its inputs (None when it has none)."""
    return next((item["value"] for item in inputs(request).get("labels", []) if item["label"] == name), None)
