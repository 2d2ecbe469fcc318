"""The supervisor's reach into one member's node (scripts/supervisor.py): the head's engine through its Docker
socket, a worker's over ssh with the supervisor's own key, which the worker lets run only the requests
scripts/supervisor_allow.sh allows; and the router's container on the head (spark-llm:router). Python's standard
library only; shipped beside supervisor.py
(spark_llm.plan.supervisor.program_files).
"""

from __future__ import annotations

import http.client
import json
import shlex
import socket
import subprocess
from collections.abc import Callable

from spark_llm.group.canary import request_body
from spark_llm.group.fabric_ready import FABRIC_REQUEST, FabricWant, fields_from, held_by, read_sysfs
from spark_llm.group.history import HostFields
from spark_llm.group.logs import api_logs_path, logs_command
from spark_llm.group.members import ABSENT, UNREACHABLE, Member, from_inspect, ssh_failure
from spark_llm.group.memory import GPU_SECTION, INFO_SECTION, MEMORY_REQUEST, info_section, restart_held
from spark_llm.group.records import SpecMember, SupervisorSpec
from spark_llm.group.serving import COMPLETIONS_PATH, api_key_of, serving_request
from spark_llm.group.wedge import LIVENESS_PATH
from spark_llm.group.weights import RECORD_REQUEST, weights_problem

CANARY_SECONDS = 30  # as the readiness gate's (spark_llm.remote.canary.REQUEST_SECONDS)

LOG_LINES = 5
NO_RECORD = 3  # scripts/supervisor_allow.sh's exit code for a worker that has no weights record


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def _frames(raw: bytes) -> str:
    """Docker's multiplexed log stream (8-byte frame headers) -> text."""
    out, i = b"", 0
    while i + 8 <= len(raw):
        size = int.from_bytes(raw[i + 4 : i + 8], "big")
        out += raw[i + 8 : i + 8 + size]
        i += 8 + size
    return out.decode(errors="replace")


class Node:
    """One member's node: its engine container read and started the one way the node allows."""

    def __init__(self, spec: SupervisorSpec, member: SpecMember) -> None:
        self.name, self.role, self.container = member["name"], member["role"], spec["container"]
        self.expected_id = member["container_id"]
        self.socket = spec["docker_socket"]
        self.weights_path = spec["weights_record"]  # the head's (mounted read-only); a worker's is asked for
        self.meminfo_path = spec["meminfo"]
        ssh = ["ssh", "-i", spec["key_path"], "-o", f"UserKnownHostsFile={spec['known_hosts']}"]
        ssh += [w for o in spec["ssh_options"] for w in ("-o", o)]
        self.ssh = ssh + ["-p", str(member["port"]), f"{member['user']}@{member['address']}"]

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

    def read(self) -> Member:
        try:
            if self.role == "head":
                code, body = self._api("GET", f"/containers/{self.container}/json", timeout=10)
                if code == 404:
                    return Member(self.name, self.role, ABSENT)
                if code != 200:
                    return Member(self.name, self.role, UNREACHABLE, error=f"docker answered {code}")
                return self._member(json.loads(body))
            run = self._remote(shlex.join(["docker", "inspect", self.container]))
        except (OSError, subprocess.TimeoutExpired, ValueError) as err:
            return Member(self.name, self.role, UNREACHABLE, error=str(err)[:200])
        if run.returncode not in (0, 255) and "No such" in run.stderr:  # 255: ssh's own failure
            return Member(self.name, self.role, ABSENT)
        if run.returncode == 255:  # ssh's own failure: in words fit for `spark-llm status` to relay
            return Member(self.name, self.role, UNREACHABLE, error=ssh_failure(self.name, run.stderr))
        if run.returncode != 0:
            return Member(self.name, self.role, UNREACHABLE, error=run.stderr.strip()[-200:])
        return self._member(json.loads(run.stdout)[0])

    def _member(self, info: dict) -> Member:
        # A container that is not the one `pulumi up` created: a `pulumi up --replace` at work, or someone's own.
        other = bool(self.expected_id) and info.get("Id", "") != self.expected_id
        foreign = "another deployment than the one this supervisor watches (`pulumi up` replaced it?)" if other else ""
        return from_inspect(self.name, self.role, info.get("State") or {}, foreign=foreign)

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

    def weights_record(self) -> tuple[str | None, str]:
        """This node's weights record (spark_llm.group.weights): (its text, or None when it has none; '' or why it
        could not be read). The head's from its mount, a worker's with the one request its key may make for it."""
        try:
            if self.role == "head":
                with open(self.weights_path) as f:
                    return f.read(), ""
            run = self._remote(RECORD_REQUEST)
        except FileNotFoundError:
            return None, ""
        except (OSError, subprocess.TimeoutExpired) as err:
            return None, str(err)[:200]
        if run.returncode == NO_RECORD:
            return None, ""
        if run.returncode == 255:  # ssh's own failure
            return None, ssh_failure(self.name, run.stderr)
        if run.returncode != 0:
            return None, (run.stderr.strip() or f"exit {run.returncode}")[-200:]
        return run.stdout, ""

    def memory(self) -> dict[str, str]:
        """This node's memory as the admission reads it (spark_llm.group.memory): the head's from its mounted
        /proc/meminfo (no nvidia-smi in this container), a worker's with the one request its key may make for it."""
        try:
            if self.role == "head":
                with open(self.meminfo_path) as f:
                    return {
                        INFO_SECTION: info_section(f.read()),
                        GPU_SECTION: "!not read by the supervisor on the head",
                    }
            run = self._remote(MEMORY_REQUEST)
        except (OSError, subprocess.TimeoutExpired) as err:
            return {INFO_SECTION: f"!{str(err)[:200]}"}
        if run.returncode != 0:
            why = ssh_failure(self.name, run.stderr) if run.returncode == 255 else run.stderr.strip()[-200:]
            return {INFO_SECTION: f"!{why or f'exit {run.returncode}'}"}
        return dict(line.split("\t", 1) for line in run.stdout.splitlines() if "\t" in line)

    def fabric(self, interfaces: list[str], sysfs: str) -> tuple[HostFields, str]:
        """This node's fabric fields as spark_llm.group.fabric_ready judges them: (the fields, '' or why they could
        not be read). The head's from its /sys mounted at `sysfs`, a worker's with the one request its key may make."""
        if self.role == "head":
            return read_sysfs(sysfs, interfaces), ""
        try:
            run = self._remote(shlex.join([*FABRIC_REQUEST.split(), *interfaces]))
        except (OSError, subprocess.TimeoutExpired) as err:
            return {}, str(err)[:200]
        if run.returncode != 0:
            why = ssh_failure(self.name, run.stderr) if run.returncode == 255 else run.stderr.strip()[-200:]
            return {}, why or f"exit {run.returncode}"
        return fields_from(run.stdout), ""

    def logs(self) -> list[str]:
        return [line[:300] for line in self.log_text(LOG_LINES).splitlines()[-LOG_LINES:]]

    def log_text(self, lines: int, since: int | None = None) -> str:
        """The engine's last `lines` lines (`since`: a Unix time, the lines of the start made then only); "" when
        they cannot be read."""
        try:
            if self.role == "head":
                _, raw = self._api("GET", api_logs_path(self.container, lines, since))
                return _frames(raw)
            run = self._remote(logs_command(self.container, tail=lines, since=None if since is None else str(since)))
            return run.stdout if run.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            return ""


class HeadApi:
    """Rank 0's API on the head (loopback or its fabric address), asked as the readiness gate asks it."""

    def __init__(self, spec: SupervisorSpec) -> None:
        self.spec = spec

    def liveness(self) -> int | None:
        """The HTTP code of rank 0's liveness route (`/health`: up while a collective hangs; 503 while loading)."""
        try:
            conn = http.client.HTTPConnection(self.spec["api_host"], self.spec["api_port"], timeout=5)
            conn.request("GET", LIVENESS_PATH)
            return conn.getresponse().status
        except OSError:
            return None

    def metrics(self, path: str, timeout: float = 5) -> str | None:
        """Rank 0's Prometheus metrics (its text format), None when it does not answer them."""
        try:
            conn = http.client.HTTPConnection(self.spec["api_host"], self.spec["api_port"], timeout=timeout)
            conn.request("GET", path)
            response = conn.getresponse()
            return response.read().decode(errors="replace") if response.status == 200 else None
        except OSError:
            return None

    def completion(self, timeout: float = 10) -> int | None:
        """The HTTP code of the one-token completion that means "serving" (the readiness gate's own request)."""
        headers = {"Content-Type": "application/json"}
        key = self.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body = json.dumps(serving_request(self.spec["model"]))
        try:
            conn = http.client.HTTPConnection(self.spec["api_host"], self.spec["api_port"], timeout=timeout)
            conn.request("POST", COMPLETIONS_PATH, body=body, headers=headers)
            return conn.getresponse().status
        except OSError:
            return None

    def canary(self, timeout: float = CANARY_SECONDS) -> str:
        """The canary's completion (spark_llm.group.canary), as group.canary.parse_answer reads it: the response body,
        then ` HTTP<code>`; what went wrong when no answer came."""
        headers = {"Content-Type": "application/json"}
        key = self.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            conn = http.client.HTTPConnection(self.spec["api_host"], self.spec["api_port"], timeout=timeout)
            conn.request("POST", COMPLETIONS_PATH, body=json.dumps(request_body(self.spec["model"])), headers=headers)
            response = conn.getresponse()
            return f"{response.read().decode(errors='replace')} HTTP{response.status}"
        except OSError as err:
            return f"no answer within {timeout:g} s ({err})"

    def api_key(self) -> str | None:
        """The API key from the engine's own `--config` file (mounted read-only), read when needed: never kept."""
        if not self.spec["api_key_file"]:
            return None
        try:
            with open(self.spec["api_key_file"]) as f:
                return api_key_of(f.read())
        except OSError:
            return None


class RouterContainer:
    """The router's container on the head (spark-llm:router), through the head's Docker socket: its status, and
    started again, or made again from the spec when it was removed."""

    def __init__(self, spec: SupervisorSpec) -> None:
        router = spec.get("router")
        if router is None:
            raise ValueError("the spec has no router")
        self.socket, self.name, self.create_body = spec["docker_socket"], router["container"], router["create"]

    def _api(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        conn = _UnixHTTPConnection(self.socket, 30)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def status(self) -> str:
        """`running`, `exited`, ... or `absent`; `unreachable: ...` when Docker did not answer."""
        try:
            code, body = self._api("GET", f"/containers/{self.name}/json")
        except OSError as err:
            return f"unreachable: {err}"
        if code == 404:
            return ABSENT
        if code != 200:
            return f"unreachable: docker answered {code}"
        return str((json.loads(body).get("State") or {}).get("Status", "unknown"))

    def bring_back(self, action: str) -> str:
        """`start` the stopped container, or `create` it again (marked restored) and start it: what came of it."""
        try:
            if action == "create":
                code, body = self._api("POST", f"/containers/create?name={self.name}", self.create_body)
                if code != 201:
                    return f"failed: docker create answered {code}: {body.decode(errors='replace')[:200]}"
            code, body = self._api("POST", f"/containers/{self.name}/start")
        except OSError as err:
            return f"failed: {str(err)[:200]}"
        if code not in (204, 304):
            return f"failed: docker start answered {code}: {body.decode(errors='replace')[:200]}"
        return "created and started" if action == "create" else "started"


# ---------- what holds a restart (read from the members' nodes before every start) ----------


def weights_held(members: list[Node]) -> str | None:
    """Why the group must not be started on its members' weights (None: it may), read before every start: a copy
    cut short leaves a worker's record `unverified`, and only `pulumi up` copies and verifies the weights (issue 31,
    2). A record that cannot be read is waited for too: it may be a node still booting."""
    records: list[tuple[str, str | None]] = []
    for member in members:
        text, error = member.weights_record()
        if error:
            return f"the weights record on {member.name} could not be read ({error}); the group starts once it is"
        records.append((member.name, text))
    return weights_problem(records)


def fabric_held(members: list[Node], spec: SupervisorSpec, say: Callable[[str], None]) -> str | None:
    """Why the group must not be restarted onto its nodes' fabric now (spark_llm.group.fabric_ready, the rule
    `pulumi preview` refuses a start on): a RoCE device missing, not ACTIVE or without an address, a fabric MTU not
    spark-llm:network.mtu. Restarted onto it, NCCL would run on sockets until the next restart (a port still coming
    up after a reboot) or drop packets; the group waits, and starts once the fabric is ready. A node whose fabric
    cannot be read is not held on (said): the verdict already waits for a node that does not answer."""
    ready = spec.get("fabric_ready")
    if not ready:
        return None
    hosts = {}
    for member in members:
        fields, error = member.fabric(ready["interfaces"], ready["sysfs"])
        if error:
            say(f"could not read {member.name}'s fabric before the restart ({error}); not held on it")
            return None
        hosts[member.name] = fields
    want = FabricWant(tuple(ready["roce_devices"]), tuple(ready["interfaces"]), ready["mtu"])
    stack = ["--stack", ready["stack"]] if ready.get("stack") else []
    return held_by(want, hosts, lambda node, argv: shlex.join(["spark-llm", "exec", *stack, node, "--", *argv]))


def held(members: list[Node], seen: list[Member], spec: SupervisorSpec, say: Callable[[str], None]) -> str | None:
    """Why the group must not be restarted now (None: it may): its weights, its nodes' memory
    (spark_llm.group.memory.restart_held), its fabric. Nothing is started (nor stopped) then: it waits, saying why,
    and spends no restart of its budget."""
    if weights := weights_held(members):
        return weights  # the memory and the fabric are not read then (a round trip to each worker each)
    memory = [(m.name, m.memory(), s.running) for m, s in zip(members, seen, strict=True)]
    return restart_held(memory, spec["memory"]) or fabric_held(members, spec, say)
