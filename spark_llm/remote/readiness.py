"""The readiness gate: `pulumi up` ends when rank 0 generates a token, not when containers started.

While it waits it watches every member of the group: if any engine container exits, the wait ends at once
with the last log lines of every node in the error, so a worker crash at init is reported as itself instead
of as a head that hangs at "Init torch distributed begin" (what the seeds saw after "Worker launched").
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from spark_llm.plan.hosts import SshHost
from spark_llm.remote.runner import run_script
from spark_llm.remote.ssh import RemoteError

POLL_SECONDS = 2.0
LOG_LINES = 30


@dataclass(frozen=True)
class Member:
    name: str
    role: str
    ssh: SshHost
    script_path: str
    fabric_address: str = ""


def _members(props: dict) -> list[Member]:
    return [
        Member(m["name"], m["role"], SshHost.from_props(m["connection"]), m["script_path"], m.get("fabric_address", ""))
        for m in props["members"]
    ]


def _probe_script(props: dict) -> str:
    """On the head: one-token completion against rank 0 at the address the head reaches it (loopback when the API
    listens on every address, so no port needs to be open outside; else the one address it listens on).

    With an API key the header reaches curl through a file descriptor (`-H @<(printf ...)`, printf being a bash
    builtin): the key travels in this script over ssh's stdin and is on no command line on the head.
    """
    body = json.dumps({"model": props["model"], "prompt": "ping", "max_tokens": 1})
    key = props.get("api_key")
    auth = f"-H @<(printf 'Authorization: Bearer %s\\n' {shlex.quote(key)}) " if key else ""
    return (
        f"out=$(curl -sS -m 10 -o - -w ' HTTP%{{http_code}}' {auth}"
        f"http://{props['address']}:{int(props['port'])}/v1/completions "
        f"-H 'Content-Type: application/json' -d {shlex.quote(body)} 2>&1) || true\n"
        'echo "$out" | tail -c 300\n'
    )


def redact(text: str, secret: str | None) -> str:
    """An engine may log its own arguments (the key included): errors and progress never show it."""
    return text.replace(secret, "[spark-llm:apiKey]") if secret else text


def _status(member: Member) -> str:
    try:
        out = run_script(member.ssh, f"{member.script_path} status {member.name}\n", timeout=60)
        return out.strip().splitlines()[-1] if out.strip() else "unknown"
    except RemoteError as err:
        return f"unreachable ({str(err).splitlines()[0]})"


def _log_tails(members: list[Member]) -> dict[str, str]:
    tails = {}
    for m in members:
        try:
            text = run_script(m.ssh, f"{m.script_path} logs {m.name} {LOG_LINES}\n", timeout=60)
        except RemoteError as err:
            text = f"(could not read the log: {str(err).splitlines()[0]})"
        tails[m.name] = text.rstrip()
    return tails


def _logs(members: list[Member], tails: dict[str, str]) -> str:
    return "\n".join(f"---- {m.name} ({m.role}): last {LOG_LINES} lines ----\n{tails[m.name]}" for m in members)


def relayed_from(members: list[Member], failed: Member, tail: str) -> list[Member]:
    """Other members whose lines the failed member's log carries.

    With Ray the driver (the head) relays every actor's output tagged `(Actor pid=N, ip=ADDR)` and re-raises a
    remote error as `ray::Actor.method() (pid=N, ip=ADDR, ...)`: a worker's crash ends the head's container while
    the worker's own container runs on. Naming that worker points at the real culprit.
    """
    return [
        m
        for m in members
        if m is not failed and m.fabric_address and re.search(rf"\bip={re.escape(m.fabric_address)}(?![\d.])", tail)
    ]


def exited_message(members: list[Member], failed: Member, state: str, tails: dict[str, str]) -> str:
    lines = [f"{failed.name} ({failed.role}): engine container is {state} while the group was starting."]
    for m in relayed_from(members, failed, tails[failed.name]):
        lines.append(
            f"{failed.name}'s log carries lines from {m.name} (ip={m.fabric_address}), relayed by Ray:"
            f" look there for the first error."
        )
    lines += [
        _logs(members, tails),
        "Fix the cause (the log above), then run `pulumi up` again: the group restarts in order.",
    ]
    return "\n".join(lines)


class GroupNotReadyError(RuntimeError):
    """The group did not become ready; the message says which node and carries every node's log tail."""


def wait_ready(spec: dict, *, say: Callable[[str], None]) -> float:
    """Poll until rank 0 generates; raise GroupNotReadyError as soon as any member's container is not running.

    `spec`: {"members": [{name, role, connection (SshHost props), script_path, fabric_address}], "address", "port",
    "model", "timeout", "api_key"}. Returns the seconds it took.
    """
    members = _members(spec)
    head = next(m for m in members if m.role == "head")
    key = spec.get("api_key") or None
    deadline = time.monotonic() + float(spec["timeout"])
    start = time.monotonic()
    last_report = 0.0
    while True:
        for m in members:
            state = _status(m)
            if not state.startswith("running"):
                tails = {name: redact(text, key) for name, text in _log_tails(members).items()}
                raise GroupNotReadyError(exited_message(members, m, state, tails))
        probe = run_script(head.ssh, _probe_script(spec), timeout=60).strip()
        if probe.endswith("HTTP200"):
            waited = round(time.monotonic() - start, 1)
            say(f"[{head.name}] ready: rank 0 generated a token after {waited} s")
            return waited
        now = time.monotonic()
        if now > deadline:
            raise GroupNotReadyError(
                f"rank 0 on {head.name} did not generate within {spec['timeout']} s (last answer: {probe!r}).\n"
                f"{redact(_logs(members, _log_tails(members)), key)}\n"
                "Raise spark-llm:timeouts.readySeconds if the model needs longer to load, else fix the cause."
            )
        if now - last_report >= 15:
            say(f"[{head.name}] waiting for rank 0 to generate ({now - start:.0f} s)")
            last_report = now
        time.sleep(POLL_SECONDS)


def main() -> int:
    """`python -m spark_llm.remote.readiness` with the spec as JSON on stdin (the key must not be on a command line).

    Run by the readiness gate, a pulumi-command `local.Command` (components/engine_group.py): its output streams
    into `pulumi up`, and a failure's message (this process's stderr) becomes the step's error.
    """
    spec = json.load(sys.stdin)

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        wait_ready(spec, say=say)
    except (GroupNotReadyError, RemoteError) as err:
        sys.stderr.write(f"{err}\n")
        return 1
    except Exception as err:  # noqa: BLE001 - a bug of ours: one line for `pulumi up`, not a traceback
        sys.stderr.write(f"spark-llm readiness gate failed: {type(err).__name__}: {err}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
