#!/usr/bin/env python3
"""spark-llm supervisor: restarts each engine group in order when a member stops, each within its own budget.

Runs in the `spark-llm-supervisor` container on the head (components/supervisor.py), Python's standard library
only. Usage: supervisor.py SPEC.json [SPEC.json ...] (one per model's group, written by `pulumi up`, 0600, mounted
read-only; spark_llm.plan.supervisor). Each group is watched in a thread of its own, so one group's restart (minutes
on a Spark) never holds up another's; the main thread keeps the router.

Every `poll_seconds` it reads every member's engine container: the head's through the head's Docker socket, each
worker's with `docker inspect` over ssh (its own key, which a worker lets run only docker inspect/start/stop/logs on
the engine: scripts/supervisor_allow.sh; the workers' pinned host keys). The group's verdict
is spark_llm.group.verdict's, the one `pulumi preview` and `spark-llm status` use (so a group this restarts is no
drift for the next `pulumi up`: the same containers, started again in order), with the supervisor's policy: a
member absent, unreachable or replaced is waited for. A broken group is restarted in spark_llm.group.order (each
worker must stay up `startup_grace` seconds), then it waits until rank 0 serves (spark_llm.group.serving: the
readiness gate's one-token completion, with the API key read from the engine's own key file). At most
`max_restarts` restarts in `window_seconds` (spark_llm.group.budget); past that it stops every member, records why
and does nothing more until `pulumi up` deploys a new supervisor. It starts no group on weights not verified on
every member (spark_llm.group.weights: a copy cut short): it waits, saying so, for `pulumi up`.
A group whose containers all run but whose rank 0 answers no completion for `wedge_seconds` (spark_llm.group.wedge:
several probes; during a start only while its /health says 200) is wedged: restarted the same way, within the same
budget, its record's cause `wedged`.
What it did is in STATE (`state_path`, written atomically): `spark-llm status` and `pulumi preview` show it.
With spark-llm:monitoring it also writes, every poll, each group's verdict, restarts, budget left and last start
(NCCL transport per rank, phases) as metrics for the head's node exporter (spark_llm.group.agent_metrics).
With spark-llm:router it also keeps the router's container up on the head: one removed or stopped (and not back
within its grace) is made again from the spec, or started, and recorded in STATE's `router_restarts`; no engine is
touched for it (spark_llm.group.router).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

# Each member's node, reached the one way it allows, and the router's container (its own file, shipped beside this).
from supervisor_node import HeadApi, Node, RouterContainer, held, weights_held

# The group's room (spark_llm/group, standard library only) is shipped beside this file: the verdict, the order, the
# budget and the times are the ones `pulumi preview` and `spark-llm status` use.
from spark_llm.group import agent_metrics
from spark_llm.group.budget import next_step, recent
from spark_llm.group.canary import CanaryRecord, after_restart
from spark_llm.group.fabric import fabric_records
from spark_llm.group.history import append_file, read_file, restart_record
from spark_llm.group.members import Member
from spark_llm.group.order import start_order, stop_order
from spark_llm.group.records import (
    IN_PROGRESS,
    Budget,
    GaveUp,
    RestartRecord,
    RouterRestart,
    SupervisorSpec,
    SupervisorState,
    dumps,
    parse_state,
)
from spark_llm.group.router import RouterWatch
from spark_llm.group.serving import serves
from spark_llm.group.times import iso
from spark_llm.group.verdict import BROKEN, SUPERVISE, WAIT, WHOLE, Verdict, judge
from spark_llm.group.wedge import (
    LIVENESS_PATH,
    WEDGED,
    TokenWatch,
    WedgeWatch,
    asked,
    metric_sum,
    probe_seconds,
    unanswered_while_live,
)
from spark_llm.group.weights import verified_digest

KEPT_RESTARTS = 20  # restart records kept in the state file (the budget needs only the window's)
NCCL_LINES = 5000  # a rank's log lines since a restart read for its fabric proof (INIT,NET: a few dozen a communicator)


# ---------- the loop ----------


class Supervisor:
    def __init__(self, spec: SupervisorSpec) -> None:
        self.spec = spec
        self.several = False
        self.members = [Node(spec, m) for m in spec["members"]]
        self.api = HeadApi(spec)
        # Its state file is written by its watch and by the router's keeper (the main thread): one at a time.
        self.lock = threading.RLock()
        self.state = self._load()
        self.watch = WedgeWatch(spec["wedge_seconds"], asked(spec["model"]))
        # With spark-llm:monitoring, the wedge alert's own signal too (spark_llm.group.wedge.TokenWatch).
        tokens = spec.get("tokens")
        self.tokens = TokenWatch(spec["wedge_seconds"], tokens["generated"]) if tokens else None
        self.probe_timeout = probe_seconds(spec["wedge_seconds"])
        # Outside its own restart, the group is past its start once rank 0 answered (the readiness gate saw it before
        # this program was started), once a restart of its own ended (its wait for serving is over), or once a
        # start's bound passed since this program began (it found the group already running).
        self.began, self.past_start = time.monotonic(), False
        # What its metrics say of the group (spark_llm.group.agent_metrics): the last verdict, its own restarts.
        self.judged, self.restarts_made = WHOLE, 0
        # spark-llm:router: kept up beside the group, never by touching an engine (spark_llm.group.router).
        router = spec.get("router")
        self.router = RouterContainer(spec) if router else None
        self.router_watch = RouterWatch(router["grace_seconds"]) if router else None

    def _load(self) -> SupervisorState:
        fresh: SupervisorState = {
            "deployment": self.spec["deployment"],
            "revision": self.spec["revision"],
            "restarts": [],
            "gave_up": None,
        }
        try:
            with open(self.spec["state_path"]) as f:
                state = parse_state(f.read())
        except OSError:
            return fresh
        # Another deployment's record (an older group): its budget and its verdict are not this group's.
        if state is None or state.get("deployment") != self.spec["deployment"]:
            return fresh
        state.setdefault("restarts", [])
        for record in state["restarts"]:
            if record.get("result") == IN_PROGRESS:  # this program was stopped in the middle of it
                record["result"] = "interrupted: the supervisor stopped (the head rebooted, or `pulumi up` stopped it)"
        return state

    def save(self, *, waiting: str | None = None, gave_up: GaveUp | None = None, keep_waiting: bool = False) -> None:
        """Write the state (atomically): `waiting`, what it waits for (None: nothing), unless `keep_waiting`."""
        with self.lock:
            self._save(waiting, gave_up, keep_waiting)

    def _save(self, waiting: str | None, gave_up: GaveUp | None, keep_waiting: bool) -> None:
        if not keep_waiting:
            self.state["waiting"] = waiting
        if gave_up is not None:
            self.state["gave_up"] = gave_up
        self.state["checked_at"] = iso(time.time())
        self.state["restarts"] = self.state["restarts"][-KEPT_RESTARTS:]
        if "router_restarts" in self.state:
            self.state["router_restarts"] = self.state["router_restarts"][-KEPT_RESTARTS:]
        path = self.spec["state_path"]
        with open(path + ".tmp", "w") as f:
            f.write(dumps(self.state))
        os.replace(path + ".tmp", path)

    def say(self, text: str) -> None:
        # Among several groups, each line names its model (one model's lines read as they always did).
        who = f"supervisor [{self.spec['model']}]" if self.several else "supervisor"
        print(f"{iso(time.time())} {who}: {text}", flush=True)

    def read_all(self) -> list[Member]:
        return [m.read() for m in self.members]

    def verdict(self) -> tuple[Verdict, list[Member]]:
        """The group's verdict with the supervisor's policy: what only `pulumi up` can mend is waited for."""
        seen = self.read_all()
        return judge(seen, SUPERVISE), seen

    def weights_held(self) -> str | None:
        return weights_held(self.members)

    def held(self, seen: list[Member]) -> str | None:
        """Why the group must not be restarted now, read from its members' nodes (supervisor_node.held)."""
        return held(self.members, seen, self.spec, self.say)

    def stop_all(self) -> str:
        """In the group's stop order (as `pulumi up` stops them); '' or what failed."""
        errors = [f"{m.name}: {err}" for m in stop_order(self.members) if (err := m.act("stop"))]
        return "; ".join(errors)

    def _start(self, member: Node) -> str:
        """Start one member and see it stay up for the startup grace; '' or why it did not."""
        err = member.act("start")
        if err:
            return f"{member.name} did not start: {err}"
        deadline = time.monotonic() + self.spec["startup_grace"]
        while True:
            seen = member.read()
            if not seen.running:
                tail = " | ".join(member.logs()[-3:])
                return f"{member.name}'s engine {seen.status} ({seen.exit_code}) during start: {tail}"
            if time.monotonic() >= deadline:
                return ""
            time.sleep(1)

    def restart(self, reason: str, logs: dict[str, list[str]], cause: str = "") -> None:
        """The ordered restart, recorded in the state as it starts and when it ends."""
        started = time.time()
        record: RestartRecord = {"at": iso(started), "started": started, "reason": reason, "seconds_to_serving": None}
        if cause:
            record["cause"] = cause
        self.watch.reset()
        if self.tokens is not None:
            self.tokens.reset()
        self.restarts_made += 1
        # Recorded before anything is stopped: a restart cut short (the head rebooted again) still counts.
        record["result"], record["logs"] = IN_PROGRESS, logs
        self.state["restarts"].append(record)
        self.save()
        self.say(f"restarting the group in order: {reason}")
        failure = self.stop_all()
        for member in start_order(self.members):
            failure = failure or self._start(member)
        if not failure:
            failure = self._wait_serving()
            self.past_start = True
        record["ended"] = time.time()
        if failure:
            record["result"] = f"failed: {failure}"
        else:
            record["result"] = "served"
            record["seconds_to_serving"] = round(record["ended"] - started, 1)
        self.say(f"restart {record['result']} after {record['ended'] - started:.1f} s")
        self.save()
        self.record_start(record, int(started))

    def record_start(self, restart: RestartRecord, since: int) -> None:
        """The restart as a line of the head's history of starts, as `pulumi up`'s gate writes one: `spark-llm
        status` and `pulumi preview` read the latest start whoever made it (issue 41, 1)."""
        served = restart.get("result") == "served"
        head = next((m for m in self.members if m.role == "head"), None)
        weights = verified_digest(head.weights_record()[0]) if served and head else ""
        entry = restart_record(self.spec["revision"], self.spec["profile"], restart, weights)
        if served:
            entry["canary"] = self.canary().to_json()
        fabric = self.spec.get("fabric")
        if served and fabric:
            # The fabric proof, as the gate's: each rank's NCCL lines of this start (a little before it: clocks).
            logs = {m.name: m.log_text(NCCL_LINES, since - 2) for m in self.members}
            entry["fabric"] = fabric_records(logs, fabric["addresses"], tuple(fabric["roce_devices"]))
            for node, rank in sorted(entry["fabric"].items()):
                if rank.get("problem"):  # serving all the same: slow beats down; status and preview say it
                    self.say(f"{node}: {rank['problem']}; the group serves (`spark-llm status` names it)")
        try:
            append_file(self.spec["history_path"], entry)
        except OSError as err:
            self.say(f"could not record the restart in the history of starts ({err})")

    def canary(self) -> CanaryRecord:
        """The canary after a restart that served, recorded with it, and said at once when the revision answers
        differently from its gate's record (spark_llm.group.canary.after_restart)."""
        history = read_file(self.spec["history_path"])
        names = [m.name for m in self.members]
        record, changed = after_restart(self.api.canary(), self.spec["revision"], names, history)
        if changed:
            self.say(changed)
        return record

    def _wait_serving(self) -> str:
        """'' once rank 0 serves, else why not: a member stopped, the start's bound passed, or a wedge (rank 0's
        /health says it is up, yet it answers nothing for `wedge_seconds`: the start is over, the answers are not)."""
        deadline = time.monotonic() + self.spec["ready_seconds"]
        while time.monotonic() < deadline:
            verdict, _ = self.verdict()
            if verdict.state != WHOLE:
                return verdict.why
            if self.probe(starting=True):
                return ""
            if wedged := self.watch.verdict(time.time()):
                return wedged
            time.sleep(1)
        return f"rank 0 did not answer a one-token completion within {self.spec['ready_seconds']} s"

    def probe(self, starting: bool = False) -> bool:
        """Ask rank 0 the one-token completion; feed the wedge watch; True when it answered. `starting`: in the
        supervisor's own restart, where only a rank 0 that says it is up (/health 200) counts toward a wedge."""
        at = time.time()
        code = self.api.completion(self.probe_timeout)
        if serves(code):
            self.watch.answered(at)
            self.past_start = True
            return True
        live = self.api.liveness()
        if starting:
            counts = unanswered_while_live(live, code)
        else:
            counts = self.past_start or time.monotonic() - self.began >= self.spec["ready_seconds"]
        answer = f"HTTP {code}" if code else f"no answer within {self.probe_timeout:g} s"
        self.watch.not_answered(at, counts, f"{answer}, {LIVENESS_PATH} {live or 'no answer'}")
        return False

    def wedged(self) -> str | None:
        """Why the whole group is wedged (None: it answers, or a probe is not due, or not yet for the bound): the
        wedge alert's signal at rank 0 (with monitoring), else the probes'."""
        if (stalled := self.stalled()) is not None:
            return stalled
        if not self.watch.due(time.time()):
            return None
        if self.probe():
            return None
        wedged = self.watch.verdict(time.time())
        if wedged is None and self.watch.since is not None:
            since, bound = iso(self.watch.since), self.spec["wedge_seconds"]
            waiting = f"rank 0 answers nothing since {since} ({self.watch.last}); wedged once that lasts {bound} s"
            if self.state.get("waiting") != waiting:
                self.say(waiting)
                self.save(waiting=waiting)
        return wedged

    def stalled(self) -> str | None:
        """The wedge alert's signal, read at rank 0 each poll: requests running and its generated-tokens counter
        standing still for the bound (None without monitoring, or while tokens come)."""
        tokens = self.spec.get("tokens")
        if self.tokens is None or tokens is None:
            return None
        text = self.api.metrics(tokens["path"])
        now = time.time()
        if text is None:
            self.tokens.feed(now, None, None)
            return None
        self.tokens.feed(now, metric_sum(text, tokens["running"]), metric_sum(text, tokens["generated"]))
        return self.tokens.verdict(now)

    def keep_router(self) -> None:
        """Bring the router back when it was removed or stopped (past its grace), and record it in the state."""
        if self.router is None or self.router_watch is None:
            return
        status = self.router.status()
        if status.startswith("unreachable"):
            return
        action = self.router_watch.action(status, time.monotonic())
        if action is None:
            return
        result = self.router.bring_back(action)
        record: RouterRestart = {"at": iso(time.time()), "found": status, "result": result}
        with self.lock:
            self.state.setdefault("router_restarts", []).append(record)
        self.say(f"the router's container was {status}: {result}")
        self.save(keep_waiting=True)

    def give_up(self, reason: str, budget: Budget) -> None:
        count = len(recent(self.state["restarts"], time.time(), budget))
        self.stop_all()
        why = f"{reason} (after {count} restarts in {budget['window_seconds']} s)" if count else reason
        self.say(f"gave up: {why}; every member stopped, `pulumi up` starts the group again")
        self.save(gave_up={"at": iso(time.time()), "reason": why, "restarts": count})
        self.judged = agent_metrics.GAVE_UP

    def reading(self) -> agent_metrics.GroupReading:
        """What its metrics say of the group now: its verdict, restarts, the budget left, the last start's record."""
        budget = self.spec["budget"]
        with self.lock:
            within = len(recent(self.state["restarts"], time.time(), budget))
        history = read_file(self.spec["history_path"])
        return agent_metrics.group_reading(
            self.spec["model"],
            agent_metrics.GAVE_UP if self.state.get("gave_up") else self.judged,
            self.restarts_made,
            max(budget["max_restarts"] - within, 0),
            [m["name"] for m in self.spec["members"]],
            dict(history[-1]) if history else None,
        )

    def run(self) -> None:
        """Watch the group until it gives up (the router is kept by `keep_routers`, in the main thread)."""
        budget = self.spec["budget"]
        self.say(f"watching {', '.join(m.name for m in self.members)} (revision {self.spec['revision']})")
        self.save()
        while not self.state.get("gave_up"):
            verdict, seen = self.verdict()
            why, cause = verdict.why, ""
            if verdict.state == WHOLE and (wedged := self.wedged()):
                why, cause = wedged, WEDGED
            self.judged = BROKEN if cause else verdict.state
            if verdict.state == WHOLE and not cause:
                if self.state.get("waiting") and self.watch.since is None:
                    self.save()
            elif verdict.state == WAIT:
                if self.state.get("waiting") != why:
                    self.say(f"waiting: {why}")
                    self.save(waiting=why)
            elif held := self.held(seen):
                # Nothing is started (nor stopped) on weights not verified on every member, nor into a node whose
                # memory cannot hold its engine now, nor onto a fabric a start would not take: it waits, saying why,
                # and spends no restart of its budget.
                if self.state.get("waiting") != held:
                    self.say(f"{why}; not restarting: {held}")
                    self.save(waiting=held)
            else:
                # The members that stopped; for a wedge (all run), rank 0's last lines.
                logs = {
                    m.name: m.logs()
                    for m, s in zip(self.members, seen, strict=True)
                    if not s.running or (cause and m.role == "head")
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
                self.restart(why, logs, cause)
            time.sleep(self.spec["poll_seconds"])
        # Nothing more for this group until a new deployment replaces this container; the others and the router go on.


def _thread_died(hook: threading.ExceptHookArgs) -> None:
    """A watch that raised: the whole program exits (its traceback on stderr), and the container's restart policy
    starts it again, as when it watched one group; a group is never left unwatched while the others go on."""
    sys.__excepthook__(hook.exc_type, hook.exc_value or hook.exc_type(), hook.exc_traceback)
    os._exit(1)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("Usage: supervisor.py SPEC.json [SPEC.json ...]", file=sys.stderr)
        return 2
    # `docker stop` (pulumi up stops the supervisor before it touches a group) sends SIGTERM: leave at once.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    groups = []
    for path in argv[1:]:
        with open(path) as f:
            spec: SupervisorSpec = json.load(f)
        groups.append(Supervisor(spec))
    for group in groups:
        group.several = len(groups) > 1
    threading.excepthook = _thread_died
    for group in groups:
        threading.Thread(target=group.run, name=group.spec["model"], daemon=True).start()
    # The router (in the first group's spec): kept here, so no group's restart holds it up.
    keepers = [group for group in groups if group.router is not None]
    poll = min(group.spec["poll_seconds"] for group in groups)
    textfile = groups[0].spec.get("textfile")
    while True:
        for group in keepers:
            group.keep_router()
        if textfile:
            write_metrics(textfile, groups)
        time.sleep(poll)


def write_metrics(directory: str, groups: list[Supervisor]) -> None:
    """Every group's reading as the head's exporter reads it (spark-llm:monitoring): replaced whole each poll."""
    text = agent_metrics.render([group.reading() for group in groups], [], time.time())
    try:
        agent_metrics.write(directory, agent_metrics.TEXTFILE_NAME, text)
    except OSError as err:
        print(f"{iso(time.time())} supervisor: could not write its metrics in {directory} ({err})", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
