"""`spark-llm init`: from the head's address to a reviewed stack file, through the ssh path the program will use.

    spark-llm init --stack dual-spark --head nvidia@192.168.1.10 --key ~/.ssh/id_ed25519 --recipe NAME

It scans each node's host key (a worker's from the head) and pins the one you accept; reads each node (the
ConnectX-7 port whose RoCE link is ACTIVE, both RoCE twins, the fabric address and MTU, the management interface,
GPU, memory, architecture, free disk at the model path, Docker's runtimes); checks what it found (the head reaches
every worker's fabric address with a full frame, equal MTUs, no two interfaces in one subnet); then writes
Pulumi.STACK.yaml beside Pulumi.yaml, every discovered value with a comment saying where it came from, and creates
the stack. Nothing is written when anything is wrong, and never over an existing file without --force (which keeps
a backup). No secret goes in the file: init prints the `pulumi config set --secret` lines to run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import yaml

from spark_llm.config import NAMESPACE, ConfigError, parse, raw_from_pulumi
from spark_llm.config import recipe as recipes
from spark_llm.ops.init import discover, host_keys, write
from spark_llm.ops.init.checks import Reach
from spark_llm.ops.init.document import Found, document
from spark_llm.ops.init.facts import NodeFacts
from spark_llm.ops.init.inputs import InitError, Spec, Wanted, config_from, parse_spec, recipe_named, recipe_source
from spark_llm.ops.init.report import as_json, describe
from spark_llm.ops.init.stack_file import Extra, merge_extras, render, written_config
from spark_llm.ops.pulumi_cli import PulumiCli
from spark_llm.plan.hosts import KeyFile, SshHost
from spark_llm.plan.scripts import PROJECT_DIR
from spark_llm.remote import key_files
from spark_llm.remote.runner import KEYSCAN_SECONDS, presented_host_key
from spark_llm.remote.ssh import fingerprint

# Needs no stack config: it makes one.
USES_PLAN = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--head", required=True, metavar="USER@ADDRESS[:PORT]", help="the head, as you ssh to it")
    parser.add_argument("--key", default="~/.ssh/id_ed25519", help="your ssh private key (default: %(default)s)")
    parser.add_argument(
        "--worker",
        action="append",
        default=[],
        metavar="[USER@]ADDRESS[:PORT]",
        help="a worker, as the head reaches it (repeat; default: found among the head's fabric neighbours)",
    )
    parser.add_argument("--recipe", help="start from recipes/NAME.yaml (`spark-llm recipes` lists them)")
    parser.add_argument(
        "--config-from",
        action="append",
        default=[],
        metavar="FILE",
        help="more config keys from a YAML file of `spark-llm:` keys (repeat: a later file's keys win)",
    )
    parser.add_argument(
        "--accept", action="append", default=[], metavar="SHA256:...", help="a host key fingerprint you checked"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the file; write nothing, make no stack")
    parser.add_argument("--force", action="store_true", help="replace an existing stack file (kept as a backup)")


def run(pulumi: PulumiCli, plan: object, args: argparse.Namespace) -> int:
    del plan
    try:
        return Init(pulumi, args).run()
    except key_files.KeyFileError as err:
        # The program's words name the stack key; init's key is --key.
        first = str(err).splitlines()[0]
        hint = "give --key a private key the nodes accept, readable by you alone (e.g. --key ~/.ssh/id_ed25519)"
        sys.stderr.write(f"spark-llm init: {first}: {hint}\nspark-llm init: nothing written\n")
        return 2
    except (InitError, host_keys.HostKeyError, discover.DiscoveryError) as err:
        for line in str(err).splitlines():
            sys.stderr.write(f"spark-llm init: {line}\n")
        sys.stderr.write("spark-llm init: nothing written\n")
        return 2


class Init:
    def __init__(self, pulumi: PulumiCli, args: argparse.Namespace) -> None:
        self.pulumi = pulumi
        self.args = args
        self.say = sys.stderr.write  # progress on stderr: stdout is the file with --dry-run

    def run(self) -> int:
        args = self.args
        if not args.stack:
            raise InitError("init makes a stack: name it with --stack, e.g. --stack dual-spark")
        if args.config_file:
            raise InitError(f"init writes Pulumi.{args.stack}.yaml beside Pulumi.yaml; --config-file is not for init")
        head = parse_spec(args.head, "--head")
        workers = [parse_spec(w, "--worker", default_user=head.user) for w in args.worker]
        key_path = os.path.abspath(os.path.expanduser(args.key))
        key_files.check_keys({"key": KeyFile(key_path, "--key")})
        target = PROJECT_DIR / f"Pulumi.{args.stack}.yaml"
        if target.exists() and not (args.force or args.dry_run):
            raise InitError(
                f"{target} exists: init never overwrites it. Review it, or run init again with --force (the old file"
                " is kept beside it), or with --dry-run to print the new one"
            )
        chosen = recipe_named(args.recipe) if args.recipe else None
        files = [config_from(path) for path in args.config_from]
        from_recipe = [Extra(dict(recipes.config_keys(chosen)), recipe_source(chosen))] if chosen else []
        wanted = Wanted.of(merge_extras(from_recipe + files), chosen.model.weights_bytes if chosen else 0)
        pinned = self._pinned(target)

        head_ssh = SshHost("head", head.host, head.port, head.user, key_path, "")
        key, how = self._key("head", head, None, pinned)
        head_ssh = replace(head_ssh, host_key=key)
        self.say(f"reading the head ({head.user}@{head.host}) ...\n")
        head_facts = discover.read_node(head_ssh, head.host, model_path=wanted.model_path, image=wanted.image)
        nodes = [Found("head", head_ssh, head_facts, how, "--head")]
        extras = (self._recipe_extras(chosen, head_ssh, head_facts, files) if chosen else []) + files
        found_by = "--worker"
        if not workers:
            self._stop_on(wanted.problems({"head": head_facts}, []))
            workers = self._neighbours(head_ssh, head_facts)
            found_by = f"found among the head's fabric neighbours on {head_facts.fabric_interface}"
        for i, spec in enumerate(workers, start=1):
            name = f"worker-{i}"
            key, how = self._key(name, spec, head_ssh, pinned)
            ssh = SshHost(name, spec.host, spec.port, spec.user, key_path, key, via=head_ssh)
            self.say(f"reading {name} ({spec.user}@{spec.host} through the head) ...\n")
            facts = discover.read_node(ssh, spec.host, model_path=wanted.model_path, image=wanted.image)
            nodes.append(Found("worker", ssh, facts, how, found_by))

        self._stop_on(wanted.problems({n.ssh.name: n.facts for n in nodes}, self._reaches(nodes)))
        written = f"on {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC from {head.user}@{head.host}"
        text = render(document(nodes, key_path, extras, write.pulumi_keys(target), written))
        self._check(text)
        self._unchanged(nodes)
        for found in nodes:
            self.say(describe(found) + "\n")
        if not args.dry_run:
            write.write(self.pulumi, args.stack, target, text, self.say)
        if args.json:
            report = {"stack": args.stack, "file": str(target), "written": not args.dry_run, "text": text}
            sys.stdout.write(json.dumps({**report, "nodes": [as_json(found) for found in nodes]}, indent=2) + "\n")
        elif args.dry_run:
            sys.stdout.write(text)
        return 0

    @staticmethod
    def _stop_on(found: list[str]) -> None:
        if found:
            raise InitError("\n".join(found))

    def _neighbours(self, head: SshHost, facts: NodeFacts) -> list[Spec]:
        """The head's fabric neighbours that answer ssh: the workers (one that answers only ping is named, left out)."""
        iface = facts.fabric_interface or ""
        answering: list[Spec] = []
        for address in discover.neighbours(head, facts):
            key = host_keys.scan(address, 22, head)
            if key is None:
                self.say(f"{address} answers on the head's fabric but not ssh: left out (--worker names a worker)\n")
            else:
                answering.append(Spec(head.user, address, 22, scanned=key))  # scanned once: _key takes it
        if not answering:
            raise InitError(
                f"no --worker given and no node answers ssh on the head's fabric ({iface} {facts.address_on(iface)}):"
                " name each worker with --worker ADDRESS, as the head reaches it"
            )
        self.say(f"workers among the head's fabric neighbours: {', '.join(s.host for s in answering)}\n")
        return answering

    @staticmethod
    def _reaches(nodes: list[Found]) -> list[Reach]:
        head = nodes[0]
        iface = head.facts.fabric_interface
        if not iface:
            return []
        mtu = head.facts.interfaces[iface].mtu
        reaches = []
        for found in nodes[1:]:
            address = found.facts.address_on(found.facts.fabric_interface or "")
            if address is not None:
                reaches.append(discover.reach(head.ssh, head.facts, found.ssh.name, str(address.ip), mtu))
        return reaches

    # -- inputs --------------------------------------------------------------------------------------------------

    def _recipe_extras(
        self, chosen: recipes.Recipe, head: SshHost, facts: NodeFacts, files: list[Extra]
    ) -> list[Extra]:
        """The recipe's keys, its weights under the head user's ~/models, and a revision: the recipe's, a file's, or
        the one the Hub serves now (read on the head, which downloads them), so the stack is pinned from the start."""
        keys = dict(recipes.config_keys(chosen))
        home = facts.home or ("/root" if head.user == "root" else f"/home/{head.user}")
        model = dict(keys[f"{NAMESPACE}:model"])  # type: ignore[call-overload]
        model["path"] = f"{home}/models/{chosen.model.name.split('/')[-1]}"
        keys[f"{NAMESPACE}:model"] = model
        extras = [Extra(keys, recipe_source(chosen))]
        given = merge_extras(files).get(f"{NAMESPACE}:model", ({}, ""))[0]
        if "source" in model or (isinstance(given, dict) and "source" in given):
            return extras
        sha, why = discover.hub_revision(head, chosen.model.name)
        if sha is None:
            raise InitError(
                f"recipe {chosen.name} pins no revision of {chosen.model.name}, and the head could not read the Hub's"
                f" current one ({why}): pin one in a --config-from file (spark-llm:model: source: kind: huggingface,"
                f" repo: {chosen.model.name}, revision: <the 40-hex commit>)"
            )
        source = {"kind": "huggingface", "repo": chosen.model.name, "revision": sha}
        where = f"revision: the Hub's main when init ran (huggingface.co/api/models/{chosen.model.name})"
        return [*extras, Extra({f"{NAMESPACE}:model": {"source": source}}, where)]

    @staticmethod
    def _pinned(target: Path) -> dict[tuple[str, int], str]:
        """The keys an earlier init (the file now at `target`) pinned, by address and port."""
        try:
            nodes = written_config(target.read_text()).get(f"{NAMESPACE}:nodes") or []
        except (OSError, yaml.YAMLError):
            return {}
        return {
            (str(n.get("host")), int(n.get("port", 22))): str(n.get("hostKey"))
            for n in nodes
            if isinstance(n, dict) and n.get("hostKey")
        }

    def _key(self, name: str, spec: Spec, via: SshHost | None, pinned: dict[tuple[str, int], str]) -> tuple[str, str]:
        key = spec.scanned or host_keys.scan(spec.host, spec.port, via)
        if key is None:
            if via is None:
                raise InitError(
                    f"the head {spec.host}:{spec.port} did not answer ssh-keyscan within {KEYSCAN_SECONDS} s:"
                    f" check the address and that sshd runs there (`ssh -p {spec.port} {spec.user}@{spec.host}`)"
                )
            raise InitError(
                f"{name} {spec.host}:{spec.port} did not answer ssh-keyscan from the head: give the address the head"
                " reaches it at (its fabric address), and check sshd runs there"
            )
        earlier = pinned.get((spec.host, spec.port))
        fp = fingerprint(key)
        if earlier is not None and earlier.split()[:2] != key.split()[:2] and fp not in self.args.accept:
            raise host_keys.HostKeyError(
                f"{name} ({spec.host}) presents {host_keys.describe(key)}, not the key the existing stack file pins"
                f" ({host_keys.describe(earlier)}): if the node was reinstalled, compare the new key on its console"
                f" and run init with --accept {fp} --force; otherwise something else answers at that address"
            )
        where = f"{spec.host}:{spec.port}" + (" through the head" if via else "")
        how = host_keys.accept(name, where, key, self.args.accept)
        return key, f"{how} (ssh-keyscan from {'the head' if via else 'this machine'})"

    # -- before writing ------------------------------------------------------------------------------------------

    @staticmethod
    def _check(text: str) -> None:
        """The program's own parse of what would be written (a bad --config-from or recipe value is named here)."""
        values = {k: v if isinstance(v, str) else json.dumps(v) for k, v in written_config(text).items()}
        try:
            with contextlib.chdir(PROJECT_DIR):  # a local model source is relative to the project
                parse(raw_from_pulumi(values))
        except ConfigError as err:
            raise InitError(f"the file init would write does not pass the program's checks: {err}") from None

    @staticmethod
    def _unchanged(nodes: list[Found]) -> None:
        """Each node still presents the key accepted at the start (a key that changes meanwhile is refused)."""
        for found in nodes:
            ssh = found.ssh
            now = presented_host_key(ssh)  # the pinned key's type, from here or through the head
            if now is None or now.split()[:2] != ssh.host_key.split()[:2]:
                shown = host_keys.describe(now) if now else "no key"
                raise host_keys.HostKeyError(
                    f"{ssh.name}'s host key changed during init (accepted {host_keys.describe(ssh.host_key)}, now"
                    f" {shown}): find out why before trusting it"
                )
