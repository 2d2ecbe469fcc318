#!/usr/bin/env python3
"""spark-llm supervisor: restarts the engine group in order when a member stops, within a budget.

Runs in the `spark-llm-supervisor` container on the head (components/supervisor.py), Python's standard library
only. Usage: supervisor.py SPEC.json (written by `pulumi up`, 0600, mounted read-only; spark_llm.plan.supervisor).

Every `poll_seconds` it reads every member's engine container: the head's through the head's Docker socket, each
worker's with `docker inspect` over ssh (the head's fabric key, the workers' pinned host keys). The group is healthy
when every member runs and no worker started after the head (spark_llm.plan.drift judges it the same way, so a
group this restarts is no drift for the next `pulumi up`: the same containers, started again in order). Otherwise
it restarts the group: head stopped, workers stopped (last rank first), workers started in rank order (each must
stay up `startup_grace` seconds), head started, then waits until the head's /health answers 200. At most
`max_restarts` restarts in `window_seconds`, the n-th after a wait of `backoff_seconds * 2**(n-1)`; past that it
stops every member, records why and does nothing more until `pulumi up` deploys a new supervisor.
What it did is in STATE (`state_path`, written atomically): `spark-llm status` and `pulumi preview` show it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone

IN_PROGRESS = "in progress"
KEPT_RESTARTS = 20  # restart records kept in the state file (the budget needs only the window's)
LOG_LINES = 5


# ---------- pure: the judgement and the budget (tests/unit/scripts/test_supervisor_policy.py) ----------

_RFC3339 = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$")


def parse_time(text: str) -> float | None:
    """Docker's RFC 3339 time (nanoseconds, `Z`; trailing zeros trimmed) -> epoch seconds; None for its zero time."""
    match = _RFC3339.match(text or "")
    if not match or text.startswith("0001-"):
        return None
    zone = match.group(3) if match.group(3) not in (None, "Z") else "+00:00"
    return datetime.fromisoformat(match.group(1) + zone).timestamp() + float("0." + (match.group(2) or "0"))


def judge(members: list[dict]) -> tuple[str, str]:
    """("healthy" | "unhealthy" | "wait", why) from each member's state, in rank order (head first).

    A member's state: {name, role, status (running, exited, created, absent, unreachable), exit_code, started_at,
    id, expected_id}. Unreachable: wait (a rebooting node answers again; a restart could not reach it anyway).
    Absent, or another container than the deployment's: wait, touching nothing (a `pulumi up --replace` replaces
    members without stopping this first, and only `pulumi up` can put the deployment's container back).
    """
    problems = []
    for m in members:
        if m["status"] == "unreachable":
            return "wait", f"{m['name']} does not answer ({m.get('error', '')})".replace(" ()", "")
        if m["status"] == "absent":
            return "wait", f"{m['name']} has no engine container (only `pulumi up` creates one)"
        if m.get("expected_id") and m.get("id") != m["expected_id"]:
            return (
                "wait",
                f"{m['name']}'s engine is another container than this deployment's (`pulumi up` replaced it?)",
            )
        if m["status"] != "running":
            problems.append(f"{m['name']}'s engine {m['status']} ({m.get('exit_code', '?')})")
    if problems:
        return "unhealthy", "; ".join(problems)
    head = parse_time(members[0]["started_at"]) or 0.0
    late = [m["name"] for m in members[1:] if (parse_time(m["started_at"]) or 0.0) > head]
    if late:
        return "unhealthy", "; ".join(f"{name}'s engine restarted after the head's" for name in late)
    return "healthy", ""


def next_step(restarts: list[dict], now: float, budget: dict) -> tuple[str, float]:
    """("restart", seconds to wait first) or ("give_up", 0): the budget's answer to a group found unhealthy.

    `restarts`: the records so far ({started: epoch, ended: epoch, ...}); those that started within
    `window_seconds` count. The first restart in the window waits nothing; the n-th waits `backoff_seconds *
    2**(n-2)` after the previous one ended (10 s, 20 s, 40 s, ... by default).
    """
    recent = [r for r in restarts if now - r["started"] < budget["window_seconds"]]
    if len(recent) >= budget["max_restarts"]:
        return "give_up", 0.0
    if not recent:
        return "restart", 0.0
    wait = budget["backoff_seconds"] * 2 ** (len(recent) - 1)
    last_end = max(r.get("ended") or r["started"] for r in recent)
    return "restart", max(0.0, last_end + wait - now)


def iso(epoch: float) -> str:
    # timezone.utc, not datetime.UTC: an engine image may carry Python 3.10.
    return datetime.fromtimestamp(epoch, timezone.utc).strftime(  # noqa: UP017
        "%Y-%m-%dT%H:%M:%SZ"
    )


# ---------- the members' engines: the head's through its Docker socket, the workers' over ssh ----------


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def _state_of(info: dict) -> dict:
    state = info.get("State") or {}
    return {
        "status": state.get("Status", "unknown"),
        "exit_code": state.get("ExitCode", 0),
        "started_at": state.get("StartedAt", ""),
        "id": info.get("Id", ""),
    }


def _frames(raw: bytes) -> str:
    """Docker's multiplexed log stream (8-byte frame headers) -> text."""
    out, i = b"", 0
    while i + 8 <= len(raw):
        size = int.from_bytes(raw[i + 4 : i + 8], "big")
        out += raw[i + 8 : i + 8 + size]
        i += 8 + size
    return out.decode(errors="replace")


class Member:
    """One member's engine container, read and started the one way its node allows."""

    def __init__(self, spec: dict, member: dict) -> None:
        self.name, self.role, self.container = member["name"], member["role"], spec["container"]
        self.expected_id = member.get("container_id", "")
        self.socket = spec["docker_socket"]
        ssh = ["ssh", "-i", spec.get("key_path", ""), "-o", f"UserKnownHostsFile={spec.get('known_hosts', '')}"]
        ssh += [w for o in spec.get("ssh_options", []) for w in ("-o", o)]
        self.ssh = ssh + ["-p", str(member.get("port", 22)), f"{member.get('user')}@{member.get('address')}"]

    def _api(self, method: str, path: str, timeout: float = 30) -> tuple[int, bytes]:
        conn = _UnixHTTPConnection(self.socket, timeout)
        try:
            conn.request(method, path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def _remote(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """`command` (one shell line: ssh hands the worker's shell a string) run on the worker."""
        return subprocess.run(
            [*self.ssh, "--", command], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )

    def read(self) -> dict:
        base = {"name": self.name, "role": self.role, "expected_id": self.expected_id}
        try:
            if self.role == "head":
                code, body = self._api("GET", f"/containers/{self.container}/json", timeout=10)
                if code == 404:
                    return {**base, "status": "absent"}
                if code != 200:
                    return {**base, "status": "unreachable", "error": f"docker answered {code}"}
                return {**base, **_state_of(json.loads(body))}
            run = self._remote(shlex.join(["docker", "inspect", self.container]))
        except (OSError, subprocess.TimeoutExpired, ValueError) as err:
            return {**base, "status": "unreachable", "error": str(err)[:200]}
        if run.returncode == 255:
            return {**base, "status": "unreachable", "error": run.stderr.strip()[-200:]}
        if run.returncode != 0:
            if "No such" in run.stderr:
                return {**base, "status": "absent"}
            return {**base, "status": "unreachable", "error": run.stderr.strip()[-200:]}
        return {**base, **_state_of(json.loads(run.stdout)[0])}

    def act(self, verb: str) -> str:
        """`start` or `stop` the engine container; '' when done, else what went wrong."""
        try:
            if self.role == "head":
                query = "?t=10" if verb == "stop" else ""
                code, body = self._api("POST", f"/containers/{self.container}/{verb}{query}")
                return "" if code in (204, 304) else f"docker {verb} answered {code}: {body.decode()[:200]}"
            run = self._remote(shlex.join(["docker", verb, *(["-t", "10"] if verb == "stop" else []), self.container]))
            return "" if run.returncode == 0 else (run.stderr.strip() or f"exit {run.returncode}")[-300:]
        except (OSError, subprocess.TimeoutExpired) as err:
            return str(err)[:300]

    def logs(self) -> list[str]:
        try:
            if self.role == "head":
                _, raw = self._api("GET", f"/containers/{self.container}/logs?stdout=1&stderr=1&tail={LOG_LINES}")
                text = _frames(raw)
            else:
                run = self._remote(f"docker logs --tail {LOG_LINES} {shlex.quote(self.container)} 2>&1")
                text = run.stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        return [line[:300] for line in text.splitlines()[-LOG_LINES:]]


# ---------- the loop ----------


class Supervisor:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.members = [Member(spec, m) for m in spec["members"]]
        self.state = self._load()

    def _load(self) -> dict:
        fresh = {"deployment": self.spec["deployment"], "revision": self.spec["revision"], "restarts": []}
        try:
            with open(self.spec["state_path"]) as f:
                state = json.load(f)
        except (OSError, ValueError):
            return {**fresh, "gave_up": None}
        # Another deployment's record (an older group): its budget and its verdict are not this group's.
        if state.get("deployment") != self.spec["deployment"]:
            return {**fresh, "gave_up": None}
        for record in state.get("restarts", []):
            if record.get("result") == IN_PROGRESS:  # this program was stopped in the middle of it
                record["result"] = "interrupted: the supervisor stopped (the head rebooted, or `pulumi up` stopped it)"
        return state

    def save(self, **changes: object) -> None:
        self.state.update(changes, checked_at=iso(time.time()))
        self.state["restarts"] = self.state["restarts"][-KEPT_RESTARTS:]
        path = self.spec["state_path"]
        with open(path + ".tmp", "w") as f:
            json.dump(self.state, f, indent=1, sort_keys=True)
        os.replace(path + ".tmp", path)

    def say(self, text: str) -> None:
        print(f"{iso(time.time())} supervisor: {text}", flush=True)

    def read_all(self) -> list[dict]:
        return [m.read() for m in self.members]

    def stop_all(self) -> str:
        """Head first, then the workers last rank first (as `pulumi up` stops them); '' or what failed."""
        head, workers = self.members[0], self.members[1:]
        errors = [f"{m.name}: {err}" for m in [head, *reversed(workers)] if (err := m.act("stop"))]
        return "; ".join(errors)

    def _start(self, member: Member) -> str:
        """Start one member and see it stay up for the startup grace; '' or why it did not."""
        err = member.act("start")
        if err:
            return f"{member.name} did not start: {err}"
        deadline = time.monotonic() + self.spec["startup_grace"]
        while True:
            seen = member.read()
            if seen["status"] != "running":
                tail = " | ".join(member.logs()[-3:])
                return f"{member.name}'s engine {seen['status']} ({seen.get('exit_code', '?')}) during start: {tail}"
            if time.monotonic() >= deadline:
                return ""
            time.sleep(1)

    def restart(self, reason: str, logs: dict) -> None:
        """The ordered restart, recorded in the state as it starts and when it ends."""
        started = time.time()
        record: dict = {"at": iso(started), "started": started, "reason": reason, "seconds_to_serving": None}
        # Recorded before anything is stopped: a restart cut short (the head rebooted again) still counts.
        record.update(result=IN_PROGRESS, logs=logs)
        self.state["restarts"].append(record)
        self.save(waiting=None)
        self.say(f"restarting the group in order: {reason}")
        failure = self.stop_all()
        for member in [*self.members[1:], self.members[0]]:
            failure = failure or self._start(member)
        if not failure:
            failure = self._wait_serving()
        record["ended"] = time.time()
        if failure:
            record["result"] = f"failed: {failure}"
        else:
            record["result"] = "served"
            record["seconds_to_serving"] = round(record["ended"] - started, 1)
        self.say(f"restart {record['result']} after {record['ended'] - started:.1f} s")
        self.save()

    def _wait_serving(self) -> str:
        deadline = time.monotonic() + self.spec["ready_seconds"]
        while time.monotonic() < deadline:
            verdict, why = judge(self.read_all())
            if verdict != "healthy":
                return why
            if self._health() == 200:
                return ""
            time.sleep(1)
        return f"the head's /health did not answer 200 within {self.spec['ready_seconds']} s"

    def _health(self) -> int | None:
        try:
            conn = http.client.HTTPConnection(self.spec["health_host"], self.spec["health_port"], timeout=5)
            conn.request("GET", "/health")
            return conn.getresponse().status
        except OSError:
            return None

    def give_up(self, reason: str, budget: dict) -> None:
        count = len([r for r in self.state["restarts"] if time.time() - r["started"] < budget["window_seconds"]])
        self.stop_all()
        why = f"{reason} (after {count} restarts in {budget['window_seconds']} s)" if count else reason
        self.say(f"gave up: {why}; every member stopped, `pulumi up` starts the group again")
        self.save(gave_up={"at": iso(time.time()), "reason": why, "restarts": count}, waiting=None)

    def run(self) -> None:
        budget = self.spec["budget"]
        self.say(f"watching {', '.join(m.name for m in self.members)} (revision {self.spec['revision']})")
        self.save()
        while not self.state.get("gave_up"):
            seen = self.read_all()
            verdict, why = judge(seen)
            if verdict == "healthy":
                if self.state.get("waiting"):
                    self.save(waiting=None)
            elif verdict == "wait":
                if self.state.get("waiting") != why:
                    self.say(f"waiting: {why}")
                    self.save(waiting=why)
            else:
                logs = {
                    m.name: m.logs() for m, s in zip(self.members, seen, strict=True) if s.get("status") != "running"
                }
                step, wait = next_step(self.state["restarts"], time.time(), budget)
                if step == "give_up":
                    self.give_up(why, budget)
                    break
                if wait > 0:
                    self.say(f"{why}; restarting in {wait:.0f} s (backoff)")
                    self.save(waiting=f"{why}; restart in {wait:.0f} s")
                    time.sleep(wait)
                    continue  # read again: it may have come back, or be worse
                self.restart(why, logs)
            time.sleep(self.spec["poll_seconds"])
        while True:  # nothing more until a new deployment replaces this container
            time.sleep(3600)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("Usage: supervisor.py SPEC.json", file=sys.stderr)
        return 2
    # `docker stop` (pulumi up stops the supervisor before it touches the group) sends SIGTERM: leave at once.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(argv[1]) as f:
        spec = json.load(f)
    Supervisor(spec).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
