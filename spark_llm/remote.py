"""Pulumi resources that run scripts and place files on a node over OpenSSH.

Why not pulumi-command: its provider plugin (github.com/pulumi/pulumi-command/provider) is refused by the Go
module proxy here and cannot be built (see tools/README.md). These are Pulumi dynamic resources, run by the
Pulumi engine through the Python SDK's dynamic-provider host, with pulumi-command's lifecycle:
- `triggers` (and the node) force a replace; other input changes are an update that runs `update`
  (or `create` when no `update` is given); nothing runs when inputs are unchanged;
- a failed create is not recorded, so the next `pulumi up` retries it;
- nothing runs during `pulumi preview`.
Differences, on purpose: the key is a path (no key material in state), host keys are always pinned, and the
script travels over stdin (never on a command line, never in an error message).
"""

from __future__ import annotations

import base64
import hashlib
import shlex
import subprocess
import sys
import uuid
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, Resource, ResourceProvider, UpdateResult
from pulumi.runtime import rpc

from spark_llm.ssh import FEED_PROBE_ENV, RemoteError, SshHost, run_local_script, run_script

# What `pulumi up` keeps of a script's output in state: enough to read a container ID or a digest.
STDOUT_KEEP = 4096


def _unknown(value: Any) -> bool:
    """True when preview does not know a value yet (it depends on a resource that will change)."""
    if value == rpc.UNKNOWN:
        return True
    if isinstance(value, dict):
        return any(_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_unknown(v) for v in value)
    return False


def _exports(environment: dict | None) -> str:
    """`export K=V` lines (single-quoted) that go over stdin ahead of the script."""
    out = []
    for key, value in sorted((environment or {}).items()):
        quoted = str(value).replace("'", "'\"'\"'")
        out.append(f"export {key}='{quoted}'\n")
    return "".join(out)


def _feed_probe(feed: dict) -> str:
    """Run the feed's probe on this machine: one line describing what the feed would send (an image ID)."""
    try:
        result = subprocess.run(feed["probe"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RemoteError(f"`{shlex.join(feed['probe'])}` could not run on this machine: {exc}") from None
    if result.returncode != 0:
        raise RemoteError(
            f"`{shlex.join(feed['probe'])}` failed on this machine: {result.stderr.strip()[-300:]}\n{feed['missing']}"
        )
    return result.stdout.strip()


def _diff_keys(olds: dict, news: dict, keys: tuple[str, ...]) -> list[str]:
    return [k for k in keys if _unknown(news.get(k)) or olds.get(k) != news.get(k)]


class _CommandProvider(ResourceProvider):
    """Create/update/delete by running scripts on one node; an optional read-only `check` finds drift."""

    REPLACE_KEYS = ("connection", "triggers")
    # Changes that re-run the `update` (or `create`) script; the other inputs are recorded without running.
    RUN_KEYS = ("create", "update", "environment", "feed")
    RECORD_KEYS = ("delete", "check", "label", "timeout")

    def _run(self, props: dict, script: str, *, stream: bool = True, fed: bool = False) -> str:
        """Run `script` on the node; `fed`: with the resource's feed (create/update only)."""
        target = SshHost.from_props(props["connection"])
        environment = dict(props.get("environment") or {})
        feed = props.get("feed") if fed else None
        if feed:
            environment[FEED_PROBE_ENV] = _feed_probe(feed)
        out = run_script(
            target,
            _exports(environment) + script,
            label=props.get("label") or target.name,
            timeout=props.get("timeout"),
            stream=stream,
            feed=feed["command"] if feed else None,
        )
        return out[-STDOUT_KEEP:]

    def _observe(self, props: dict) -> str | None:
        """The `check` script's output now: what the node really runs (None when there is no check).

        With a feed, what the feed would send now is part of it: a new image on this machine is drift too.
        """
        if not props.get("check"):
            return None
        try:
            observed = self._run(props, props["check"], stream=False).strip()
        except RemoteError as err:
            observed = f"unreachable: {str(err).splitlines()[0]}"
        if props.get("feed"):
            try:
                observed += f"\nsource: {_feed_probe(props['feed'])}"
            except RemoteError as err:
                observed += f"\nsource: unavailable: {str(err).splitlines()[0]}"
        return observed

    def create(self, props: dict) -> CreateResult:
        stdout = self._run(props, props["create"], fed=True)
        # A new ID on every create: dependents put it in their triggers to be replaced after this one.
        outs = {**props, "stdout": stdout, "observed": self._observe(props)}
        return CreateResult(id_=uuid.uuid4().hex, outs=outs)

    def diff(self, _id: str, olds: dict, news: dict) -> DiffResult:
        replaces = _diff_keys(olds, news, self.REPLACE_KEYS)
        changes = replaces + _diff_keys(olds, news, self.RUN_KEYS + self.RECORD_KEYS)
        if not changes:
            drift = self._drift(olds, news)
            if drift:
                # The node no longer runs what the last `pulumi up` left: preview says so, `up` recreates it.
                sys.stderr.write(f"[{news.get('label')}] drift: {drift}\n")
                replaces = changes = ["observed"]
        return DiffResult(changes=bool(changes), replaces=replaces, delete_before_replace=True)

    def _drift(self, olds: dict, news: dict) -> str | None:
        """Why the resource must be recreated although its inputs did not change (None: it need not)."""
        if olds.get("observed") is None:
            return None
        now = self._observe(news)
        return None if now == olds["observed"] else f"was {olds['observed']!r}, now {now!r}"

    def update(self, _id: str, olds: dict, news: dict) -> UpdateResult:
        if _diff_keys(olds, news, self.RUN_KEYS):
            stdout = self._run(news, news.get("update") or news["create"], fed=True)
        else:  # only what is recorded changed (delete/check script, label): nothing to run now
            stdout = olds.get("stdout", "")
        return UpdateResult(outs={**news, "stdout": stdout, "observed": self._observe(news)})

    def delete(self, _id: str, props: dict) -> None:
        if props.get("delete"):
            self._run(props, props["delete"])


def command_props(
    *,
    connection: pulumi.Input[dict],
    create: pulumi.Input[str],
    update: pulumi.Input[str] | None = None,
    delete: pulumi.Input[str] | None = None,
    check: pulumi.Input[str] | None = None,
    triggers: pulumi.Input[list] | None = None,
    environment: pulumi.Input[dict] | None = None,
    feed: dict | None = None,
    label: str | None = None,
    timeout: float | None = None,
    **extra: object,
) -> dict:
    """The inputs every command-style resource stores (its provider reads these keys), plus `extra`."""
    return {
        "connection": connection,
        "create": create,
        "update": update,
        "delete": delete,
        "check": check,
        "triggers": triggers or [],
        "environment": environment,
        "feed": feed,
        "label": label,
        "timeout": timeout,
        "stdout": None,
        "observed": None,
        **extra,
    }


class RemoteCommand(Resource, module="spark-llm", name="RemoteCommand"):
    """A script run on a node at create (and update), with an optional script run at delete.

    `check`, if given, is a read-only script whose output describes what the node runs; it is recorded after
    create and compared on every preview/up, and a difference replaces the resource (drift repair).
    `feed`, if given, streams data from this machine into the create/update script: `{"probe": argv,
    "command": argv, "missing": hint}`; the probe's output is the script's $SPARK_LLM_FEED_PROBE, the
    command's output its stdin once it prints spark_llm.ssh.FEED_REQUEST (see `run_script`).
    """

    stdout: pulumi.Output[str]
    observed: pulumi.Output[str | None]

    def __init__(
        self,
        name: str,
        *,
        connection: pulumi.Input[dict],
        create: pulumi.Input[str],
        update: pulumi.Input[str] | None = None,
        delete: pulumi.Input[str] | None = None,
        check: pulumi.Input[str] | None = None,
        triggers: pulumi.Input[list] | None = None,
        environment: pulumi.Input[dict] | None = None,
        feed: dict | None = None,
        label: str | None = None,
        timeout: float | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = command_props(
            connection=connection,
            create=create,
            update=update,
            delete=delete,
            check=check,
            triggers=triggers,
            environment=environment,
            feed=feed,
            label=label,
            timeout=timeout,
        )
        super().__init__(_CommandProvider(), name, props, opts)


class _LocalCommandProvider(_CommandProvider):
    """The same lifecycle, but the scripts run on this machine and reach the node themselves (uploads)."""

    def _run(self, props: dict, script: str, *, stream: bool = True, fed: bool = False) -> str:
        # No feed here: a local script reads whatever it needs on this machine itself.
        target = SshHost.from_props(props["connection"])
        out = run_local_script(
            target,
            _exports(props.get("environment")) + script,
            label=props.get("label") or f"local->{target.name}",
            timeout=props.get("timeout"),
            stream=stream,
        )
        return out[-STDOUT_KEEP:]


class LocalCommand(Resource, module="spark-llm", name="LocalCommand"):
    """A script run on the operator's machine with a pinned ssh_config for one node (`connection`).

    Same inputs and lifecycle as RemoteCommand; the script finds the config in $SPARK_LLM_SSH_CONFIG and the
    host alias in $SPARK_LLM_SSH_HOST (e.g. `rsync -e "ssh -F $SPARK_LLM_SSH_CONFIG" DIR/ "$SPARK_LLM_SSH_HOST:..."`).
    """

    stdout: pulumi.Output[str]
    observed: pulumi.Output[str | None]

    def __init__(
        self,
        name: str,
        *,
        connection: pulumi.Input[dict],
        create: pulumi.Input[str],
        check: pulumi.Input[str] | None = None,
        triggers: pulumi.Input[list] | None = None,
        label: str | None = None,
        timeout: float | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = command_props(
            connection=connection, create=create, check=check, triggers=triggers, label=label, timeout=timeout
        )
        super().__init__(_LocalCommandProvider(), name, props, opts)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _file_script(props: dict) -> str:
    """Write the content atomically (temp file, mode, rename), creating the directory; print its sha256."""
    path = shlex.quote(props["path"])
    mode = props.get("mode") or "0644"
    payload = base64.b64encode(props["content"].encode()).decode()
    return (
        f'dir=$(dirname {path}); mkdir -p "$dir"\n'
        'tmp=$(mktemp "$dir/.spark-llm.XXXXXX")\n'
        "trap 'rm -f \"$tmp\"' EXIT\n"
        f'chmod {mode} "$tmp"\n'
        f"base64 -d > \"$tmp\" <<'SPARK_LLM_EOF'\n{payload}\nSPARK_LLM_EOF\n"
        f'mv -f "$tmp" {path}\ntrap - EXIT\n'
        f"echo \"sha256=$(sha256sum {path} | cut -d' ' -f1)\"\n"
    )


class _FileProvider(ResourceProvider):
    """A file on a node, its content from the program; recopied only when its content hash changes."""

    REPLACE_KEYS = ("connection", "path")
    UPDATE_KEYS = ("sha256", "mode")

    def _write(self, props: dict) -> dict:
        target = SshHost.from_props(props["connection"])
        out = run_script(target, _file_script(props), label=props.get("label") or target.name, stream=False)
        remote_sha = out.strip().rsplit("sha256=", 1)[-1].strip()
        if remote_sha != props["sha256"]:
            raise RuntimeError(
                f"{target.name}:{props['path']}: wrote sha256 {remote_sha}, expected {props['sha256']}; "
                "the node's disk may be full"
            )
        return props

    def create(self, props: dict) -> CreateResult:
        return CreateResult(id_=f"{props['connection']['name']}:{props['path']}", outs=self._write(props))

    def diff(self, _id: str, olds: dict, news: dict) -> DiffResult:
        replaces = _diff_keys(olds, news, self.REPLACE_KEYS)
        changes = replaces + _diff_keys(olds, news, self.UPDATE_KEYS)
        return DiffResult(changes=bool(changes), replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, olds: dict, news: dict) -> UpdateResult:
        return UpdateResult(outs=self._write(news))

    def delete(self, _id: str, props: dict) -> None:
        if props.get("remove_on_delete"):
            target = SshHost.from_props(props["connection"])
            run_script(target, f"rm -f {shlex.quote(props['path'])}\n", stream=False)


class RemoteFile(Resource, module="spark-llm", name="RemoteFile"):
    """A file with the given content and mode on a node; `sha256` is the content's digest."""

    sha256: pulumi.Output[str]
    path: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        connection: pulumi.Input[dict],
        path: str,
        content: pulumi.Input[str],
        mode: str = "0644",
        remove_on_delete: bool = True,
        label: str | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = {
            "connection": connection,
            "path": path,
            "content": content,
            "mode": mode,
            "sha256": pulumi.Output.from_input(content).apply(sha256_text),
            "remove_on_delete": remove_on_delete,
            "label": label,
        }
        super().__init__(_FileProvider(), name, props, opts)
