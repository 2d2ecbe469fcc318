#!/usr/bin/env python3
"""spark-llm weights fan-out: make model.path on every worker identical to the head's, at the links' speed.

Runs ON the head (python3 standard library only), started by the ModelWeights component's script with a JSON
plan (spark_llm.plan.weights.fanout renders it) and the manifest tool beside it. It reaches the workers over the
fabric with the head's fabric key and their pinned host keys.

1. Scan: the head's manifest and every worker's (scripts/manifest.py, stat-cached) decide what each worker
   lacks or has wrong, and what it has that the head does not (removed at the end).
2. Receive: each worker that needs files runs an rsync daemon for the length of the copy, bound to its fabric
   address only, accepting only the cluster's fabric addresses and a one-time secret made here (never on a
   command line, in a file others can read, or in Pulumi state). It dies when this program's ssh session to it
   closes, whichever way this program ends. With transport "ssh" no daemon runs: rsync over ssh from the head.
3. Send: files go over several parallel rsync streams (`streams` per sender and per receiver). A worker that
   already has a file (it had it, or received it in this run) serves it onward, so the head's uplink is not
   the bottleneck with several workers: the copy becomes a pipeline head -> worker -> worker, file by file.
   A file the worker lacks is sent as literal data (an interrupted one resumes from rsync's partial dir); a
   file it has with other content is sent whole (`--whole-file`: the delta pass only costs on a fast link).
4. Verify: each worker's manifest, written beside its weights, must have the head's digest; then the worker's
   drift token is recorded (the plan's `record` script).

Output: a progress line per worker every PROGRESS_SECONDS (bytes, MB/s, ETA, sources), then per worker
`fanout: NAME verified DIGEST FILES BYTES` and `fanout: NAME received N files from SOURCE` lines.
Exit 1 with what failed, where, and what to do next.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from fanout_schedule import feeders, human, needs, next_batch, progress_line, short_of_space
from fanout_transport import (  # beside these files on the head (sys.path[0])
    IO_TIMEOUT_EXIT,
    IO_TIMEOUT_SECONDS,
    STATS,
    CopyError,
    Fabric,
    Hasher,
    Job,
    LinkCutError,
    Node,
    Receiver,
    disk_full,
    link_cut,
    say,
    start_rsync,
)

if TYPE_CHECKING:  # the record's one definition, beside its writer; mypy only (the head has no spark_llm)
    from spark_llm.plan.weights.fanout import FanoutPlan

PROGRESS_SECONDS = 5.0


class Copy:
    """The whole fan-out: scans, receivers, the scheduler, progress, verification."""

    def __init__(self, plan: FanoutPlan, tool: str, work: str) -> None:
        self.path = plan["path"]
        self.tool = tool
        self.streams = max(1, int(plan["streams"] or min(4, os.cpu_count() or 1)))
        self.transport = plan["transport"]
        self.timeout = float(plan["timeout"] or 6 * 3600)
        self.idle_seconds = int(plan["idle_timeout"] or IO_TIMEOUT_SECONDS)
        self.rsync = tuple(plan["rsync_options"])
        self.head = Node(name=plan["head"]["name"], address=plan["head"]["address"], is_head=True)
        self.workers = [Node(**w) for w in plan["workers"]]
        self.fabric = Fabric(os.path.expanduser(plan["fabric_key"]), plan["ssh_options"], self.workers, work)
        self.work = work
        self.secret = secrets.token_urlsafe(32)
        self.lock = threading.Lock()
        self.receivers: dict[str, Receiver] = {}
        self.hashers: dict[str, Hasher] = {}

    # ---------- manifests ----------

    def scan(self, node: Node, write: bool = False) -> dict:
        extra = " --write" if write else ""
        command = f"mkdir -p {shlex.quote(self.path)} && python3 - scan {shlex.quote(self.path)} --json{extra}"
        command += f" --node {shlex.quote(node.name)}"
        if node.is_head:
            out = subprocess.run(
                ["python3", self.tool, "scan", self.path, "--json", "--node", node.name],
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                raise CopyError(f"{node.name}: reading {self.path} failed:\n{out.stderr.strip()[-800:]}")
            return json.loads(out.stdout)
        with open(self.tool) as f:
            return json.loads(self.fabric.run(node, command, f.read(), what=f"reading {self.path}"))

    # ---------- sending ----------

    def start(self, job: Job) -> None:
        receiver = None if self.transport == "ssh" else self.receivers[job.target.name]
        start_rsync(job, self.fabric, self.path, self.secret, receiver)

    def run(self) -> None:
        say(f"fanout: reading the manifests of {self.head.name} and {len(self.workers)} worker(s)")
        source = self.scan(self.head)
        files = {f["path"]: f for f in source["files"]}
        digest = source["digest"]
        total = sum(f["size"] for f in files.values())
        targets = {w.name: self.scan(w) for w in self.workers}
        parts = needs(self.head.name, files, targets)
        need, extra, have, whole = parts.need, parts.extra, parts.have, parts.whole
        for w in self.workers:
            n, b = len(need[w.name]), sum(f["size"] for f in need[w.name])
            if n:
                say(f"fanout: {w.name} needs {n} of {len(files)} files ({human(b)} of {human(total)})")
            else:
                say(f"fanout: {w.name} has all {len(files)} files ({human(total)}), nothing to send")
        self.check_space(need, targets)
        # Each worker is verified (and its extra files removed) as soon as it has every file, while the others
        # still receive: on real nodes the hashing then hides under the transfer.
        finishers: list[threading.Thread] = []
        errors: list[CopyError] = []

        def finish(w: Node) -> None:
            def work() -> None:
                try:
                    self.finish(w, extra[w.name], source)
                except CopyError as exc:
                    errors.append(exc)
                except Exception as exc:  # a bug of ours must fail the copy, not vanish with its thread
                    errors.append(CopyError(f"{w.name}: verification stopped ({type(exc).__name__}: {exc})"))

            t = threading.Thread(target=work, daemon=True)
            t.start()
            finishers.append(t)

        for w in self.workers:
            if not need[w.name]:
                finish(w)
        # A worker the fabric no longer reaches: its sessions are ended, not waited on (ssh would wait out
        # ServerAlive, 60 s, before the error reached the user).
        cut: set[str] = set()
        try:
            if any(need.values()):
                self.send(need, have, whole, finish)
        except LinkCutError as exc:
            cut.add(exc.node)
            raise
        finally:
            for r in self.receivers.values():
                r.stop(timeout=0 if r.node.name in cut else 15)
            for t in finishers:
                t.join()
            for h in self.hashers.values():  # the copy failed: keep what they hashed, for the next run's scan
                if h.proc.poll() is None:
                    h.close(timeout=0 if h.node.name in cut else 30)
        if errors:
            raise errors[0]
        say(f"fanout: every worker has the head's {len(files)} files ({human(total)}), manifest {digest[:16]}")
        say(f"spark-llm-manifest {digest} {len(files)} {total}")  # the step's last line (spark_llm.plan.weights.steps)

    def restore(self, digest: str) -> None:
        """A rollback: every worker puts back the version `digest` it kept when a relaunch replaced it (manifest.py
        restore: hard links, no byte over the fabric), then records it; fails, changing nothing on a worker that
        did not keep it."""
        with open(self.tool) as f:
            tool = f.read()
        line = ""
        for w in self.workers:
            command = f"python3 - restore {shlex.quote(self.path)} {digest} --node {shlex.quote(w.name)}"
            line = self.fabric.run(w, command, tool, what=f"putting back the kept version {digest[:16]}").strip()
            say(f"fanout: {w.name}: version {digest[:16]} put back (hard links, nothing copied)")
            if w.record:
                self.fabric.run(w, f"SPARK_LLM_VALUE={digest}\n{w.record}", what="recording the version")
        say(line or f"spark-llm-manifest {digest} 0 0")  # the step's last line (spark_llm.plan.weights.steps)

    def check_space(self, need: dict[str, list[dict]], targets: dict[str, dict]) -> None:
        """Refuse before any byte moves when a worker's disk cannot hold what it lacks (a partial file counts as
        sent). A file sent whole over an old copy needs its size again until the rename: counted in full."""
        short = short_of_space(self.path, need, targets)
        if short:
            raise CopyError(
                "not enough space for the weights:\n  "
                + "\n  ".join(short)
                + "\nnothing was copied. Free space there (or set spark-llm:model.path to a larger disk), then run"
                " pulumi up again"
            )

    def send(
        self,
        need: dict[str, list[dict]],
        have: dict[str, set[str]],
        whole: dict[str, set[str]],
        finish: Callable[[Node], None],
    ) -> None:
        needy = [w for w in self.workers if need[w.name]]
        feeder = feeders(self.head.name, [w.name for w in self.workers], need, self.transport)
        if self.transport == "rsyncd":
            allow = [self.head.address, *(w.address for w in self.workers)]
            for w in needy:
                self.receivers[w.name] = Receiver(self.fabric, w, self.path, allow, self.secret)
            how = f"rsync daemons on the workers' fabric addresses, {self.streams} stream(s) per node"
        else:
            how = f"rsync over ssh (aes128-gcm) from the head, {self.streams} stream(s)"
        for w in needy:
            # From here until its verification the worker's weights are not the verified ones: its record says so
            # first, so a copy cut short (this program killed) leaves a worker that nothing starts an engine on
            # (the supervisor checks the record) and that preview, status and `up` see as drift (issue 31, 2).
            # The version the copy replaces stays on the worker as hard links until the next start that serves.
            with open(self.tool) as f:
                keep = f"python3 - keep {shlex.quote(self.path)} --node {shlex.quote(w.name)}"
                self.fabric.run(w, keep, f.read(), what="keeping its current version")
            if w.forget:
                self.fabric.run(w, w.forget, what="marking its weights unverified")
            self.hashers[w.name] = Hasher(self.fabric, w, self.path, self.tool)
        say(f"fanout: sending over the fabric: {how}")
        pending = {w.name: list(need[w.name]) for w in needy}
        todo = {w.name: sum(f["size"] for f in need[w.name]) for w in needy}
        done_bytes = {w.name: 0 for w in needy}
        sources: dict[str, dict[str, int]] = {w.name: {} for w in needy}
        stats: dict[str, dict[str, int]] = {w.name: dict.fromkeys(STATS.values(), 0) for w in needy}
        running: list[Job] = []
        nodes = {n.name: n for n in [self.head, *self.workers]}
        started = time.monotonic()
        last = started
        finished: dict[str, float] = {}

        def uploads(name: str) -> int:
            return sum(1 for j in running if j.source.name == name)

        def next_job(target: Node) -> Job | None:
            queue = pending[target.name]
            src = feeder[target.name]
            if uploads(src) >= self.streams:
                return None
            # Staggered streams: a link opens another stream only when each running one is 1/streams of the way
            # through its files. Streams started together share the link and finish together, so the next worker
            # in the chain would wait streams x (one file's time) for its first file; staggered, files land one
            # after another and each hop adds about one file's time (measured: capped 400 Mbit/s, 3 workers).
            if any(j.sent * self.streams < j.size for j in running if j.target is target):
                return None
            batch = next_batch(queue, have[src])
            if not batch:
                return None
            is_whole = any(g["path"] in whole[target.name] for g in batch)
            return Job(nodes[src], target, batch, is_whole, idle_seconds=self.idle_seconds, base_options=self.rsync)

        try:
            while any(pending.values()) or running:
                for w in needy:
                    while sum(1 for j in running if j.target.name == w.name) < self.streams:
                        job = next_job(w)
                        if job is None:
                            break
                        self.start(job)
                        running.append(job)
                time.sleep(0.1)
                for job in list(running):
                    assert job.proc
                    if job.proc.poll() is None:
                        continue
                    running.remove(job)
                    assert job.reader
                    job.reader.join(timeout=10)  # its last lines (rsync's stats, or its error) are read
                    if job.proc.returncode != 0:
                        if any("No space left on device" in line for line in job.tail):
                            left = todo[job.target.name] - done_bytes[job.target.name]
                            raise disk_full(self.fabric, job.target, self.path, left)
                        if job.proc.returncode == IO_TIMEOUT_EXIT:
                            raise link_cut(job, done_bytes[job.target.name], todo[job.target.name])
                        raise CopyError(
                            f"{job.target.name}: rsync from {job.source.name} failed (exit {job.proc.returncode}):\n"
                            + "\n".join(job.tail)
                            + "\nrun pulumi up again: files already copied are kept, a partial one resumes"
                        )
                    with self.lock:
                        have[job.target.name].update(f["path"] for f in job.files)
                    self.hashers[job.target.name].feed([f["path"] for f in job.files])
                    done_bytes[job.target.name] += job.size
                    if not pending[job.target.name] and not any(j.target is job.target for j in running):
                        finished[job.target.name] = time.monotonic() - started
                        finish(job.target)
                    s = sources[job.target.name]
                    s[job.source.name] = s.get(job.source.name, 0) + len(job.files)
                    for k, v in job.stats.items():
                        stats[job.target.name][k] += v
                now = time.monotonic()
                if now - started > self.timeout:
                    raise CopyError(
                        f"the copy took longer than spark-llm:timeouts.transferSeconds ({self.timeout:.0f} s); raise it"
                        " and run pulumi up again: files already copied are kept, a partial one resumes"
                    )
                if now - last >= PROGRESS_SECONDS:
                    last = now
                    for w in needy:
                        moved = done_bytes[w.name] + sum(j.sent for j in running if j.target.name == w.name)
                        self.progress(w.name, moved, todo[w.name], now - started, running)
        finally:
            for job in running:  # failed, timed out, or stopped (SIGTERM, SIGHUP): no rsync outlives this program
                assert job.proc
                if job.proc.poll() is None:
                    job.proc.terminate()
        for w in needy:
            elapsed = finished.get(w.name, time.monotonic() - started)
            st = stats[w.name]
            rate = todo[w.name] / 1e6 / max(elapsed, 1e-3)
            say(
                f"fanout: {w.name}: sent {len(need[w.name])} files in {elapsed:.3f} s (literal {st['literal']} B,"
                f" matched {st['matched']} B, wire {st['wire']} B; {rate:.0f} MB/s)"
            )
            for src, n in sorted(sources[w.name].items()):
                say(f"fanout: {w.name} received {n} files from {src}")

    def progress(self, name: str, moved: int, total: int, elapsed: float, running: list[Job]) -> None:
        sources = sorted({j.source.name for j in running if j.target.name == name})
        say(progress_line(name, moved, total, elapsed, sources))

    def finish(self, node: Node, extra: list[str], source: dict) -> None:
        """Remove the files the head does not have, then verify the worker and record its token."""
        if extra:
            names = "".join(p + "\0" for p in extra)
            self.fabric.run(
                node, f"cd {shlex.quote(self.path)} && xargs -0 rm -f --", names, what="removing extra files"
            )
            say(f"fanout: {node.name}: removed {len(extra)} files the head does not have")
        hasher = self.hashers.get(node.name)
        if hasher:
            hasher.close(self.timeout)
        after = self.scan(node, write=True)
        if after["digest"] != source["digest"]:
            theirs = {f["path"]: f["sha256"] for f in after["files"]}
            bad = [f["path"] for f in source["files"] if theirs.get(f["path"]) != f["sha256"]]
            raise CopyError(
                f"{node.name}: the copy does not match the head's manifest: {' '.join(bad)[:300]}; run pulumi up again"
            )
        n, b = len(source["files"]), sum(f["size"] for f in source["files"])
        say(f"fanout: {node.name} verified {source['digest']} {n} {b}")
        if node.record:
            self.fabric.run(node, f"SPARK_LLM_VALUE={source['digest']}\n{node.record}", what="recording the copy")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: fanout.py PLAN.json MANIFEST_TOOL.py", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        plan: FanoutPlan = json.load(f)
    tool = argv[2]
    # A process group of its own, whose ID is this pid: killed outright (SIGKILL unwinds nothing), the step's script
    # (spark_llm.plan.weights.fanout) kills what is left in it, every rsync and ssh session it started (issue 31, 2).
    os.setpgid(0, 0)
    # Stopped from outside (the ssh session to the head closed, a kill): unwind, so every rsync and daemon ends.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory() as work:
        try:
            if plan.get("restore"):
                Copy(plan, tool, work).restore(plan["restore"])
            else:
                Copy(plan, tool, work).run()
        except CopyError as exc:
            print(f"weights: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # a bug of ours: say so in one line; SPARK_LLM_DEBUG=1 shows the traceback
            if os.environ.get("SPARK_LLM_DEBUG"):
                raise
            print(
                f"weights: the copy stopped on an unexpected error ({type(exc).__name__}: {exc}); files already"
                " copied are kept: run pulumi up again, and report this if it recurs",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
