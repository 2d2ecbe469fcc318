"""spark-llm weights fan-out, the moving parts: ssh to the workers over the fabric, the rsync daemon a worker
runs to receive, the hasher that hashes each file as it lands, and each rsync stream: its options, how it starts
(into a worker's daemon from the head or a worker, or over ssh from the head), its output read, and what its
failure says (a cut link, a full disk).

Runs ON the head beside scripts/fanout.py (python3 standard library only), which runs the copy as
scripts/fanout_schedule.py plans it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass, field

from fanout_schedule import human  # beside this file on the head (sys.path[0])

RSYNC_USER = "spark-llm"
# rsync --stats lines summed per worker: literal (sent as data), matched (found in a partial file), wire.
STATS = {"Literal data": "literal", "Matched data": "matched", "Total bytes sent": "wire"}
STATS_NOISE = ("Number of ", "Total ", "File list ", "sent ", "total size ", "Matched ", "Literal ")
MODULE = "model"
# rsync gives up when no data moved for this long (spark-llm:timeouts.fabricIdleSeconds): a cut fabric otherwise
# hangs the copy (a plain TCP stream to a worker's daemon has no keepalive) until timeouts.transferSeconds, 6 hours.
IO_TIMEOUT_SECONDS = 60
IO_TIMEOUT_EXIT = 30  # rsync's "timeout in data send/receive"


def say(message: str) -> None:
    try:
        sys.stdout.write(f"{message}\n")
        sys.stdout.flush()
    except BrokenPipeError:  # pulumi's ssh session to the head is gone: stop everything (see main)
        raise SystemExit(1) from None


class CopyError(Exception):
    """What failed, where, and what to do next: the message the user sees."""


class LinkCutError(CopyError):
    """No data moved to `node` for the idle bound: its ssh sessions cannot close cleanly, so none is waited on."""

    def __init__(self, message: str, node: str) -> None:
        super().__init__(message)
        self.node = node


@dataclass(frozen=True)
class Node:
    name: str
    address: str
    user: str = ""
    port: int = 22
    host_key: str = ""
    is_head: bool = False
    record: str = ""
    forget: str = ""
    """Bash that marks the worker's weights unverified (spark_llm.plan.drift.UNVERIFIED), before the first byte of a
    copy reaches it; `record` marks them verified again."""


@dataclass
class Job:
    source: Node
    target: Node
    files: list[dict]
    whole: bool
    size: int = 0
    sent: int = 0
    proc: subprocess.Popen | None = None
    reader: threading.Thread | None = None
    tail: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    idle_seconds: int = IO_TIMEOUT_SECONDS  # rsync's --timeout: no data moved for this long is a cut link
    base_options: tuple[str, ...] = ()  # the plan's rsync options (`rsync_options`)


class Fabric:
    """ssh from the head to the workers over the fabric: the head's fabric key, each worker's pinned host key."""

    def __init__(self, key: str, options: list[str], workers: list[Node], work: str) -> None:
        self.key = key
        self.options = options
        self.known_hosts = os.path.join(work, "known_hosts")
        with open(self.known_hosts, "w") as f:
            for w in workers:
                host = w.address if w.port == 22 else f"[{w.address}]:{w.port}"
                f.write(f"{host} {w.host_key}\n")

    def ssh(self, node: Node, command: str) -> list[str]:
        """ssh to a worker with the plan's options (spark_llm.plan.fabric.FABRIC_SSH_OPTIONS) and its pinned key."""
        argv = ["ssh", "-i", self.key, "-o", f"UserKnownHostsFile={self.known_hosts}"]
        for option in self.options:
            argv += ["-o", option]
        return [*argv, "-p", str(node.port), f"{node.user}@{node.address}", command]

    def run(self, node: Node, command: str, stdin: str = "", what: str = "") -> str:
        proc = subprocess.run(self.ssh(node, command), input=stdin, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = "\n".join(proc.stderr.strip().splitlines()[-6:])
            raise CopyError(f"{node.name}: {what} failed (exit {proc.returncode}):\n{lines}")
        return proc.stdout


class Receiver:
    """An rsync daemon on a worker for the length of the copy (transport rsyncd)."""

    SCRIPT = r"""set -eu
IFS= read -r secret
d=$(mktemp -d)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; fi; rm -rf "$d"' EXIT
umask 077
printf '%s:%s\n' @USER@ "$secret" > "$d/secrets"
mkdir -p @PATH@
port=$(python3 -c 'import socket,sys; s=socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' @ADDRESS@)
cat > "$d/rsyncd.conf" <<EOF
use chroot = no
# As the login user (a root-run daemon would switch to nobody).
uid = $(id -u)
gid = $(id -g)
log file = $d/log
[@MODULE@]
  path = @RAWPATH@
  read only = false
  auth users = @USER@
  secrets file = $d/secrets
  strict modes = true
  hosts allow = @ALLOW@
  hosts deny = *
EOF
rsync --daemon --no-detach --address=@ADDRESS@ --port="$port" --config="$d/rsyncd.conf" &
pid=$!
for _ in $(seq 50); do
  if python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 1)' @ADDRESS@ "$port" \
    2>/dev/null; then break; fi
  kill -0 "$pid" 2>/dev/null || { cat "$d/log" >&2; exit 1; }
  sleep 0.1
done
echo "port $port"
# Until the head closes this session's stdin (the copy ended, or the program on the head died).
cat >/dev/null
"""

    def __init__(self, fabric: Fabric, node: Node, path: str, allow: list[str], secret: str) -> None:
        self.node = node
        script = self.SCRIPT
        for key, value in {
            "@USER@": RSYNC_USER,
            "@PATH@": shlex.quote(path),
            "@RAWPATH@": path,  # rsyncd.conf is not shell: the value runs to the end of the line
            "@ADDRESS@": shlex.quote(node.address),
            "@MODULE@": MODULE,
            "@ALLOW@": " ".join(allow),
        }.items():
            script = script.replace(key, value)
        self.proc = subprocess.Popen(
            fabric.ssh(node, script),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(secret + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line.startswith("port "):
            self.proc.kill()
            err = (self.proc.stderr.read() if self.proc.stderr else "").strip()
            raise CopyError(f"{node.name}: could not start the rsync daemon for the copy on {node.address}:\n{err}")
        self.port = int(line.split()[1])

    def url(self) -> str:
        return f"rsync://{RSYNC_USER}@{self.node.address}:{self.port}/{MODULE}/"

    def stop(self, timeout: float = 15) -> None:
        """Close the session (the daemon ends with it); `timeout` 0 for a node cut off, whose ssh cannot close."""
        try:
            assert self.proc.stdin
            self.proc.stdin.close()
            self.proc.wait(timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


class Hasher:
    """`manifest.py hash` on a worker for the length of the copy: each file is hashed into the worker's manifest
    cache as soon as it lands, so the verification at the end finds it cached and only stats it."""

    def __init__(self, fabric: Fabric, node: Node, path: str, tool: str) -> None:
        self.node = node
        with open(tool) as f:
            source = f.read()
        # The tool goes in a heredoc of the command itself: this session's stdin carries the file names.
        command = (
            "t=$(mktemp); trap 'rm -f \"$t\"' EXIT; cat > \"$t\" <<'SPARK_LLM_MANIFEST_PY'\n"
            f"{source}\nSPARK_LLM_MANIFEST_PY\n"
            f'python3 "$t" hash {shlex.quote(path)} --node {shlex.quote(node.name)}'
        )
        self.proc = subprocess.Popen(
            fabric.ssh(node, command), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def feed(self, paths: list[str]) -> None:
        try:
            assert self.proc.stdin
            self.proc.stdin.write(b"".join(os.fsencode(p) + b"\0" for p in paths))
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it died: the verification scan hashes what it did not

    def close(self, timeout: float) -> None:
        """Wait until it has hashed what it was fed (the verification after it needs the cache it writes)."""
        try:
            _, err = self.proc.communicate(timeout=timeout)  # closes its stdin: no more names
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return
        if self.proc.returncode != 0:  # not fatal: the verification hashes every file the cache lacks
            say(f"fanout: {self.node.name}: hashing during the copy failed: {err.decode(errors='replace')[-300:]}")


def link_cut(job: Job, arrived: int, total: int) -> LinkCutError:
    """What a copy that stopped moving says (rsync's --timeout expired)."""
    return LinkCutError(
        f"{job.target.name}: no data moved from {job.source.name} for {job.idle_seconds} s: the fabric between"
        f" them is cut or {job.target.name} is down ({human(arrived)} of {human(total)} had arrived). Check the link"
        " (`spark-llm preflight`), then run pulumi up again: files already copied are kept, a partial one resumes",
        job.target.name,
    )


def disk_full(fabric: Fabric, node: Node, path: str, left: int) -> CopyError:
    """rsync hit a full disk mid-copy: say where, how much is still to come and how much is free now."""
    try:
        free = int(fabric.run(node, f"df -B1 --output=avail {shlex.quote(path)} | tail -n 1", what="df"))
        now = f"{human(free)} ({free} B) free there now"
    except (CopyError, ValueError):
        now = "free space unknown"
    return CopyError(
        f"{node.name}: the disk under {path} is full (No space left on device) with {human(left)} ({left} B)"
        f" of the weights still to come; {now}. Free space on {node.name}, then run"
        " pulumi up again: the files already copied are kept, a partial one resumes"
    )


def rsync_options(job: Job) -> list[str]:
    """Every weights copy's rsync options (the plan's one list, spark_llm.plan.weights.sync.RSYNC_OPTIONS, handed
    over in the fan-out plan), then what a fan-out stream adds: its file list on stdin, progress a line at a time,
    the idle bound, and whole files where a worker feeds another."""
    opts = [*job.base_options, "--files-from=-", "--no-inc-recursive", "--outbuf=L", f"--timeout={job.idle_seconds}"]
    if job.whole:
        opts.append("--whole-file")
    return opts


def feed_rsync(job: Job, data: bytes) -> None:
    """Give a started rsync its file list, then read its output: progress into job.sent, --stats into
    job.stats, anything else (its errors) into job.tail."""
    proc = job.proc
    assert proc and proc.stdin and proc.stdout
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    buf = b""
    while chunk := os.read(proc.stdout.fileno(), 65536):
        buf += chunk
        *lines, buf = buf.replace(b"\r", b"\n").split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            first = line.split()[0].replace(",", "")
            key, _, value = line.partition(": ")
            if first.isdigit() and "%" in line:
                job.sent = min(int(first), job.size)
            elif key in STATS and value.split()[0].replace(",", "").isdigit():
                job.stats[STATS[key]] = int(value.split()[0].replace(",", ""))
            elif not line.startswith(STATS_NOISE):
                job.tail = (job.tail + [line])[-8:]


def start_rsync(job: Job, fabric: Fabric, path: str, secret: str, receiver: Receiver | None) -> None:
    """Start a job's rsync and the thread that feeds it its file list and reads its output: into the target's
    daemon (`receiver`, transport rsyncd) from the head or from a worker that has the files, or with no receiver
    (transport ssh) over ssh from the head."""
    names = "".join(f["path"] + "\0" for f in job.files)
    job.size = sum(f["size"] for f in job.files)
    opts = rsync_options(job)
    if receiver is None:
        t = job.target
        rsh = " ".join(shlex.quote(a) for a in fabric.ssh(t, "")[:-2])
        argv = ["rsync", *opts, "-e", f"{rsh} -c aes128-gcm@openssh.com", path + "/"]
        argv.append(f"{t.user}@{t.address}:{path}/")
        env = None
        command = argv
    else:
        url = receiver.url()
        rsync = shlex.join(["rsync", *opts, path + "/", url])
        if job.source.is_head:
            command = ["bash", "-c", f"exec {rsync}"]
            env = dict(os.environ, RSYNC_PASSWORD=secret)
        else:
            # The secret reaches the sending worker on the session's stdin, first line, never in argv.
            command = fabric.ssh(job.source, f"IFS= read -r RSYNC_PASSWORD; export RSYNC_PASSWORD; exec {rsync}")
            names = secret + "\n" + names
            env = None
    job.proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env
    )
    job.reader = threading.Thread(target=feed_rsync, args=(job, names.encode()), daemon=True)
    job.reader.start()
