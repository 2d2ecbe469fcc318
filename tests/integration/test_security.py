"""Where the secrets go on the sim: nowhere in plaintext but their 0600 files, and the API only where it is bound.

User story: `pulumi preview` warns an operator that the endpoint is open. They set spark-llm:apiKey and
spark-llm:hfToken as secrets (the sim's fabric key sits on the head, its operator key here) and bind the API to the
head's management address (spark-llm:engine.host). After `pulumi up` serves, no secret value shows in any
process's arguments (on this machine, which sees every node's processes too, sampled all through `up`; and `ps` in
each node), in `pulumi stack export`, in the state and config files, in `spark-llm logs`/`status` output or in
preview/up output, nor in any file others may read on a node (under the homes, /srv and /tmp) or in what deploying
writes to spark-llm's cache here. Private keys are 0600, known_hosts at most 0644. The API answers at its address
(the gate, status and a client here reach it) and not on the head's fabric address. With spark-llm:network.firewall
fabric-only, the torch rendezvous (engine.distPort), which listens on every address of the head, refuses a
connection from this machine (the management network) while the group it formed serves; the table gone from a node
(a reboot) is drift that preview names and `up` repairs without restarting the group.

And the key at work (spark-llm:apiKey, folded in from its own module: one deployment for the secrets' story): a
client without it gets 401, with it a completion, `spark-llm smoke` authenticates with it; it is in no launch
script, the readiness gate's stdin and the containers' labels hold it only encrypted, and only the head has its
file. A new key restarts the group with it (preview says so) and the old one is refused; the key removed opens the
endpoint again and removes its file from the head.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, SIM_DIR, complete, run, tcp_connect
from tests.integration.secrets_scan import NODES, ArgvSampler, files_others_read, key_needles, leaks

pytestmark = pytest.mark.integration


def set_secret(pulumi, key: str, value: str) -> None:
    """`pulumi config set --secret` with the value on stdin: not on this test's own command lines either."""
    cmd = ["pulumi", "config", "set", "--secret", key, "--stack", "sim", "--non-interactive"]
    subprocess.run(
        [*cmd, "--config-file", str(pulumi.config_file)],
        input=value,
        text=True,
        env=pulumi.env,
        cwd=REPO,
        capture_output=True,
        check=True,
        timeout=120,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_no_secret_anywhere_in_the_open_and_the_api_only_where_it_is_bound(pulumi, sim_cluster):
    api_key = f"sk-sim-{secrets.token_hex(12)}"
    hf_token = f"hf_sim{secrets.token_hex(12)}"
    needles = {
        "apiKey": [api_key],
        "hfToken": [hf_token],
        "fabric key": key_needles(SIM_DIR / "fabric_ed25519"),
        "operator key": key_needles(SIM_DIR / "id_ed25519"),
    }
    head_host = sim_cluster.nodes()[0]["host"]
    # No key yet: preview says the endpoint is open, where it listens and what to do.
    opened = pulumi("preview").stdout
    assert "warning: spark-llm:apiKey is not set: the API on head listens on 0.0.0.0:30000" in opened, opened
    assert "pulumi config set --secret spark-llm:apiKey" in opened
    set_secret(pulumi, "apiKey", api_key)
    set_secret(pulumi, "hfToken", hf_token)
    pulumi.set("engine.host", head_host)
    pulumi.set("network.firewall", "fabric-only")
    try:
        preview = pulumi("preview")
        with ArgvSampler() as sampler:
            up = pulumi.up()
        outputs = pulumi.outputs()
        assert outputs["endpoint"] == f"http://{head_host}:30000"
        assert complete(outputs, api_key=api_key)["usage"]["completion_tokens"] == 4

        checked: dict[str, int] = {}
        # Output of the program: preview and up (the open-endpoint warning is not there: a key is set).
        for name, result in (("preview", preview), ("up", up)):
            assert not leaks(result.stdout + result.stderr, needles), name
        assert "spark-llm:apiKey is not set" not in preview.stdout + preview.stderr
        checked["outputs"] = 2

        # Every command line seen here during `up` (this machine and, one kernel, every node), then on each node.
        assert len(sampler.seen) > 50
        bad = [line[:200] for line in sampler.seen if leaks(line, needles)]
        assert not bad, bad
        checked["command lines during up"] = len(sampler.seen)
        for node in NODES:
            ps = sim_cluster.node_exec(node, "ps", "-eo", "args").stdout
            assert not leaks(ps, needles), node
            checked[f"processes on {node}"] = len(ps.splitlines()) - 1

        # Pulumi's state (export without --show-secrets) and every file of the backend and the config copy.
        export = pulumi("stack", "export").stdout
        assert not leaks(export, needles)
        assert not leaks(pulumi.config_file.read_text(), needles)
        state_files = [p for p in pulumi.config_file.parent.rglob("*") if p.is_file()]  # the config copy too
        for path in state_files:
            assert not leaks(path.read_bytes().decode(errors="replace"), needles), path
        checked["state and config files"] = len(state_files)

        # The operator CLI's output: logs per node, status (both reach the API's bound address on the head).
        cli = [sys.executable, "-m", "spark_llm.ops.cli"]
        config = ["--stack", "sim", "--config-file", str(pulumi.config_file)]
        for node in NODES:
            logs = run([*cli, "logs", *config, "--node", node], env=pulumi.env, cwd=REPO)
            assert logs.stdout.strip() and not leaks(logs.stdout + logs.stderr, needles), node
        status = run([*cli, "status", *config, "--json"], env=pulumi.env, cwd=REPO)  # exit 0: in sync, healthy
        assert not leaks(status.stdout + status.stderr, needles)
        checked["CLI outputs"] = len(NODES) + 1

        # Files others may read on every node, and spark-llm's cache on this machine.
        for node in NODES:
            readable = files_others_read(sim_cluster, node)
            assert "/srv/models/standin-model/config.json" in readable  # the walk sees such files
            bad = [path for path, content in readable.items() if leaks(content.decode(errors="replace"), needles)]
            assert not bad, (node, bad)
            checked[f"files others read on {node}"] = len(readable)
        # Here: what deploying writes in spark-llm's cache (scripts/manifest.py's manifests of the local weights, the
        # upload log). The rest of that directory is the toolchain `make tools` keeps (the CLI, plugins, image
        # tarballs: gigabytes that no secret reaches, and reading them was two minutes of this test).
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spark-llm"
        written = [p for sub in ("manifests", "logs") for p in (cache / sub).rglob("*") if p.is_file()]
        assert any(p.parent.name == "manifests" for p in written), "no manifest written: the walk would see nothing"
        local = [p for p in written if mode(p) & 0o004]
        for path in local:
            assert not leaks(path.read_bytes().decode(errors="replace"), needles), path
        checked["files others read in ~/.cache/spark-llm here"] = len(local)

        # The secrets' own files: 0600 on the head; the fabric key too. No Hugging Face download: no hf.env.
        for path in ("/root/spark-llm/api-key.yaml", "/root/.ssh/id_ed25519"):
            assert sim_cluster.node_exec("head", "stat", "-c", "%a", path).stdout.strip() == "600", path
        assert sim_cluster.node_exec("head", "test", "-e", "/root/spark-llm/hf.env", check=False).returncode != 0
        # This machine's keys and known_hosts (the sim's: the program keeps no known_hosts file of its own).
        for key in (SIM_DIR / "id_ed25519", SIM_DIR / "fabric_ed25519"):
            assert mode(key) == 0o600, key
        assert mode(SIM_DIR / "known_hosts") & 0o133 == 0

        # The API listens on the head's management address only: a peer on the fabric finds nothing there.
        head_fabric = sim_cluster.fabric_address("head")
        probe = sim_cluster.node_exec(
            "worker-1", "curl", "-sS", "-m", "5", f"http://{head_fabric}:30000/health", check=False
        )
        assert probe.returncode == 7, probe  # curl: failed to connect
        # The rendezvous listens on every address of the head (torch's TCPStore takes no bind address): the firewall
        # is what refuses it here; the API, at its address, and ssh still answer.
        listening = sim_cluster.node_exec("head", "ss", "-Hltn", "sport = :20000").stdout
        assert "0.0.0.0:20000" in listening, listening
        answers = {port: tcp_connect(head_host, port) for port in (20000, 30000, 22)}
        assert answers == {20000: "refused", 30000: "open", 22: "open"}, answers
        assert "table inet spark-llm" in sim_cluster.node_exec("head", "nft", "list", "tables").stdout
        # The table does not outlive a reboot (nor `nft flush ruleset`): preview names it, up installs it again
        # and restarts nothing.
        sim_cluster.node_exec("worker-1", "nft", "delete", "table", "inet", "spark-llm")
        started = sim_cluster.started_at("worker-1")
        drift = pulumi("preview").stdout
        said = "drift: the firewall (nftables table inet spark-llm) on worker-1 changed since `pulumi up`"
        assert said in drift
        # Status says what preview says (it said `in sync` here: issue 41, 7).
        argv = [sys.executable, "-m", "spark_llm.ops.cli", "status", "--stack", "sim", "--config-file"]
        status = run([*argv, str(pulumi.config_file), "--json"], env=pulumi.env, check=False)
        report = json.loads(status.stdout)
        assert status.returncode == 1 and report["state"] == "drift" and report["summary"].startswith(said), report
        assert "spark-firewall-worker-1 replace" in drift and not re.search(r"spark-engine-\S+ (replace|create)", drift)
        pulumi.up()
        assert "table inet spark-llm" in sim_cluster.node_exec("worker-1", "nft", "list", "tables").stdout
        assert sim_cluster.started_at("worker-1") == started
        print("security walk:", json.dumps(checked))

        the_key_at_work(pulumi, sim_cluster, api_key, export)
    finally:
        pulumi("config", "rm", "apiKey", check=False)  # (the_key_at_work removed it: a no-op then)
        pulumi("config", "rm", "hfToken")
        pulumi("config", "rm", "--path", "engine.host")
        pulumi("config", "rm", "--path", "network.firewall")


KEY_FILE = "/root/spark-llm/api-key.yaml"


def status_without_key(outputs: dict) -> int:
    try:
        complete(outputs)
    except urllib.error.HTTPError as error:
        return error.code
    return 200


def the_key_at_work(pulumi, sim_cluster, key: str, export: str) -> None:
    """The endpoint wants the key, the operator tools send it, a new key restarts the group with it, no key opens
    the endpoint again (after the secrets' walk above, on its deployment)."""
    outputs = pulumi.outputs()
    assert status_without_key(outputs) == 401
    for node in NODES:
        assert key not in sim_cluster.node_exec(node, "cat", "/root/spark-llm/launch.sh").stdout
    assert sim_cluster.node_exec("head", "stat", "-c", "%a %U", KEY_FILE).stdout.strip() == "600 root"
    assert sim_cluster.node_exec("worker-1", "test", "-e", KEY_FILE, check=False).returncode != 0
    # The readiness gate reads the key on its stdin: there, and in the containers' labels, only encrypted.
    resources = {r["urn"].rsplit("::", 1)[-1]: r for r in json.loads(export)["deployment"]["resources"]}
    assert "ciphertext" in resources["spark-engine-ready"]["inputs"]["stdin"]
    assert "ciphertext" in json.dumps(resources["spark-engine-head"]["outputs"]["labels"])
    # The operator tools authenticate with the stack's key too.
    config = ["--stack", "sim", "--config-file", str(pulumi.config_file)]
    smoke = run([sys.executable, "-m", "spark_llm.ops.cli", "smoke", *config, "--requests", "1", "--concurrency", "1"],
                env=pulumi.env, cwd=REPO)  # fmt: skip
    assert key not in smoke.stdout + smoke.stderr

    # A new key: preview announces the group restart, up applies it; the old key stops working.
    new_key = f"sk-sim-{secrets.token_hex(12)}"
    set_secret(pulumi, "apiKey", new_key)
    preview = pulumi("preview").stdout
    assert "spark-scripts-head-api-key replace" in preview and "spark-engine-head replace" in preview
    assert new_key not in preview and key not in preview
    pulumi.up()
    assert complete(outputs, api_key=new_key)["usage"]["completion_tokens"] == 4
    with pytest.raises(urllib.error.HTTPError) as refused:
        complete(outputs, api_key=key)
    assert refused.value.code == 401
    # No key: the endpoint is open again and the key file is gone from the head.
    pulumi("config", "rm", "apiKey")
    pulumi.up()
    assert status_without_key(pulumi.outputs()) == 200
    assert sim_cluster.node_exec("head", "test", "-e", KEY_FILE, check=False).returncode != 0
