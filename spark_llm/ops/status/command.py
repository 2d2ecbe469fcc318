"""`spark-llm status`: what runs on every node against what the config gives now, and the head's health.

Per node: the engine container, its state, uptime, exit code when it exited, and the group revision it was
started with (its group revision label, spark_llm.plan.container.LABEL_REVISION) against `plan.group_revision`;
on the head, `/health` and the model `/v1/models` serves (all read by spark_llm.ops.status.read). The group is
judged as `pulumi preview` judges it (`differences`: a member absent, exited, on another revision or restarted
after the head; spark_llm.plan.drift makes the program restart the group for the same facts), so when this says
"drift" it also says what `pulumi up` does. When the group is in sync, the canary (spark_llm.ops.status.canary): a fixed
completion at temperature 0 against the one the readiness gate recorded for the revision; a different answer is
"answers changed", with both answers shown.
With spark-llm:monitoring, the alerts its Prometheus has firing (spark_llm.ops.status.alerts): said, never judged.
Every container up and the head's /health 200 but no answer to a one-token completion is "wedged" (spark_llm.group.
wedge), as is a restart the supervisor makes of a wedged group (its record's cause).
Exit 1 on drift, an unhealthy or wedged head or a changed answer.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from rich.text import Text

from spark_llm.group.history import fabric_fallbacks, fallback_sentence, last_failure
from spark_llm.group.members import UNREACHABLE, Member
from spark_llm.group.order import restart_steps
from spark_llm.group.verdict import RESTART, judge
from spark_llm.group.wedge import LIVENESS_PATH, WEDGED
from spark_llm.ops import render
from spark_llm.ops.pulumi_cli import PulumiCli, PulumiError
from spark_llm.ops.status import several
from spark_llm.ops.status.alerts import AlertsStatus, read_alerts
from spark_llm.ops.status.canary import CanaryCheck, canary_ask, check_canary
from spark_llm.ops.status.canary import judge as canary_verdict
from spark_llm.ops.status.firewall import firewall_drift
from spark_llm.ops.status.gpu_clock import clock_drift
from spark_llm.ops.status.memory import refusals, refused_sentence
from spark_llm.ops.status.pending import Pending, pending_operations
from spark_llm.ops.status.pending import sentence as pending_sentence
from spark_llm.ops.status.read import ANSWER_SECONDS, GroupReading, Health, NodeStatus, collect_stack
from spark_llm.ops.status.report import ModelReport
from spark_llm.ops.status.weights import weights_drift
from spark_llm.plan.deployment import DeploymentPlan
from spark_llm.plan.fabric_ready import fabric_faults
from spark_llm.plan.host_record import changes_warning, host_changes
from spark_llm.plan.stack import StackPlan
from spark_llm.plan.start.timeline import failed_start_warning
from spark_llm.remote.canary import ask_canaries


def restart_order(plan: DeploymentPlan) -> str:
    return ", ".join(restart_steps([n.name for n in plan.nodes]))


def group_members(statuses: Sequence[NodeStatus], state_id: str | None = None) -> list[Member]:
    """Pure: the members as status read them (spark_llm.group.members), in rank order.

    `state_id`: this stack's state (its `state_id` output); an engine whose owner record names another state is
    another checkout's (or a lost state's) deployment, which `pulumi up` replaces.
    """
    out = []
    for s in statuses:
        if s.state in ("unreachable", "unknown"):
            out.append(Member(s.node, s.role, UNREACHABLE, error=f"{s.state}: {s.error}" if s.error else s.state))
            continue
        foreign = "another state of this stack" if state_id and s.owner and s.owner != state_id else ""
        out.append(
            Member(
                s.node,
                s.role,
                s.state,
                exit_code=s.exit_code,
                started_at=s.started_at,
                finished_at=s.finished_at,
                oom_killed=s.oom_killed,
                rollout=s.revision,
                foreign=foreign,
            )
        )
    return out


def differences(plan: DeploymentPlan, statuses: Sequence[NodeStatus], state_id: str | None = None) -> list[str]:
    """Pure: every way the group differs from what the config gives now, one phrase each: the group's verdict
    (spark_llm.group.verdict, the restart policy, as `pulumi preview` judges it) against the config's revision."""
    return list(judge(group_members(statuses, state_id), RESTART, plan.group_revision).problems)


def verdict(
    plan: DeploymentPlan, statuses: Sequence[NodeStatus], health: Health | None, state_id: str | None = None
) -> tuple[str, str]:
    """Pure: ("in sync" | "drift" | "failed_start" | "unhealthy" | "not deployed", one sentence on what `pulumi up`
    will do). failed_start: the configured revision failed to start last time and does not serve now."""
    diffs = differences(plan, statuses, state_id)
    if all(s.state == "absent" for s in statuses):
        order = ", ".join(f"{n} started" for n in plan.start_order)
        return "not deployed", f"no engine container on any node: `pulumi up` starts the group in order: {order}"
    if any(s.state in ("unreachable", "unknown") for s in statuses):
        return "drift", (
            "; ".join(diffs) + ": `pulumi preview` cannot read that node either and counts it as drift; "
            "fix its ssh first (`spark-llm preflight`)"
        )
    failure = last_failure(health.last_start, plan.group_revision) if health is not None else None
    if failure is not None and (diffs or health is None or not health.healthy):
        head = next((s for s in statuses if s.role == "head" and s.state == "running"), None)
        return "failed_start", failed_start_warning(failure, head.revision if head else None)
    if diffs:
        return "drift", f"{'; '.join(diffs)}: `pulumi up` restarts the group in order: {restart_order(plan)}"
    if health is not None and health.wedged:
        return "wedged", wedged_sentence(plan, health)
    if health is not None and not health.healthy:
        seen = f"answers {health.http_code}" if health.http_code else f"does not answer ({health.error})"
        return "unhealthy", (
            f"every container runs revision {plan.group_revision}, but the head's {health.path} {seen}: "
            "`pulumi preview` sees no drift; still loading? see `spark-llm logs`"
        )
    if health is not None and plan.model_name not in health.models:
        return (
            "unhealthy",
            f"the head serves {', '.join(health.models) or 'no model'}, the config says {plan.model_name}",
        )
    return (
        "in sync",
        f"every member runs revision {plan.group_revision}, the head started last; `pulumi up` does nothing",
    )


def wedged_sentence(plan: DeploymentPlan, health: Health) -> str:
    """Pure: what a wedged group looks like, and what restarts it."""
    got = health.answer_error or f"HTTP {health.answer}"
    cfg = plan.supervisor
    mend = (
        f"the supervisor restarts the group in order once it answered nothing for supervisor.wedgeSeconds"
        f" ({cfg.wedge_seconds} s)"
        if cfg is not None
        else "`spark-llm restart` restarts the group in order (`pulumi preview` sees no drift)"
    )
    return (
        f"every container runs revision {plan.group_revision} and the head's {LIVENESS_PATH} answers 200, but rank 0"
        f" answered no one-token completion of {plan.model_name} within {ANSWER_SECONDS} s ({got}): the engine is"
        f" wedged (a hung NCCL collective or scheduler; `spark-llm logs`); {mend}"
    )


def stack_outputs(pulumi: PulumiCli) -> dict:
    """This stack's outputs ({} before its first `up` or when they cannot be read)."""
    try:
        value = json.loads(pulumi.capture("stack", "output", "--json"))
    except (PulumiError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def own_state_id(outputs: dict) -> str | None:
    """This stack's state id (its `state_id` output), None before its first `up` (or from an older spark-llm)."""
    value = outputs.get("state_id")
    return value if isinstance(value, str) and value else None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per node (60)")
    parser.add_argument(
        "--hosts", action="store_true", help="also each node's host as the last start that served recorded it"
    )


def run(pulumi: PulumiCli, plans: DeploymentPlan | StackPlan, args: argparse.Namespace) -> int:
    """`plans`: the stack with the models asked (spark_llm.ops.cli), or a stack's one plan; a stack of one model
    prints as it always has, a stack of several a row per model, then one block each (spark_llm.ops.status.several).

    Every node is read once for every model (one ssh session a node, the router's line in the head's); then, on the
    head, one more session asks the canary of each model in sync.
    """
    stack = StackPlan.one(plans) if isinstance(plans, DeploymentPlan) else plans
    with ThreadPoolExecutor(3) as pool:
        # The stack's outputs and the state's pending operations (a killed `up` left them: ops.status.pending), each
        # a pulumi command of its own, read while the nodes are.
        outputs_read = pool.submit(stack_outputs, pulumi)
        exported = pool.submit(state_pending, pulumi)
        alerts_read = pool.submit(read_alerts, stack)
        with render.progress(f"status: asking {len(stack.nodes)} nodes", enabled=not args.json):
            readings, gateway = collect_stack(stack, args.timeout)
        outputs, pending, alerts = outputs_read.result(), exported.result(), alerts_read.result()
    found = outputs.get("models")
    recorded: dict = found if isinstance(found, dict) else {}
    own = {name: outputs if not stack.several else recorded.get(name) or {} for name in stack.models}
    reports = [model_report(plan, own[name], readings[name]) for name, plan in stack.models.items()]
    with render.progress("status: asking the canary", enabled=not args.json):
        reports = with_canaries(stack, reports, own, readings)
    note = pending_sentence(pending, pulumi.stack_args()) if pending else ""
    more: dict[str, object] = (
        {"pending_operations": [p.to_json() for p in pending], "pending_note": note} if pending else {}
    )
    if alerts is not None:
        more["monitoring"] = alerts.to_json()
    if not stack.several:
        [report] = reports
        if args.json:
            render.emit_json({**report.to_json(), **({"router": gateway.to_json()} if gateway else {}), **more})
        else:
            report.print(render.console(), getattr(args, "hosts", False))
            if gateway is not None:
                render.console().print(Text(gateway.sentence()))
            print_alerts(alerts)
        if note and not args.json:
            render.console().print(Text(f"warning: {note}", style="yellow"))
        return 0 if report.in_sync and (gateway is None or gateway.ok) else 1
    several.emit(reports, args, gateway, more)
    if not args.json:
        print_alerts(alerts)
    if note and not args.json:
        render.console().print(Text(f"warning: {note}", style="yellow"))
    return 0 if all(r.in_sync for r in reports) and (gateway is None or gateway.ok) else 1


def print_alerts(alerts: AlertsStatus | None) -> None:
    if alerts is None:
        return
    style = "bold red" if alerts.firing else "yellow" if alerts.error else ""
    for line in alerts.lines():
        render.console().print(Text(line, style=style))


def state_pending(pulumi: PulumiCli) -> list[Pending]:
    """The operations pending in the stack's state ([] when it cannot be read: status is about the nodes)."""
    try:
        return pending_operations(pulumi.export())
    except (PulumiError, ValueError):
        return []


def with_canaries(
    stack: StackPlan, reports: list[ModelReport], outputs: dict[str, dict], readings: dict[str, GroupReading]
) -> list[ModelReport]:
    """Each report with its canary judged: asked on the head (one session for every model in sync) against the
    record of the revision its head runs; a changed answer turns an `in sync` report into `answers changed`."""
    asked = [r for r in reports if r.state == "in sync"]
    asks = [canary_ask(r.plan, _head_revision(r), _running(r)) for r in asked]
    now = ask_canaries(stack.first.head.ssh, asks) if asks else []  # no session at all when none is in sync
    answers = dict(zip((r.plan.model_name for r in asked), now, strict=True))
    out = []
    for report in reports:
        name = report.plan.model_name
        check = check_canary(_head_revision(report), readings[name].history, outputs[name], answers.get(name))
        out.append(judged_canary(report, check))
    return out


def _head_revision(report: ModelReport) -> str:
    head = next(s for s in report.statuses if s.node == report.plan.head.name)
    return head.revision or report.plan.group_revision


def _running(report: ModelReport) -> list[str]:
    return [s.node for s in report.statuses if s.state == "running"]


def judged_canary(report: ModelReport, canary: CanaryCheck) -> ModelReport:
    """Pure: the report with its canary's verdict (a change is the report's state)."""
    if canary.ok:
        return replace(report, canary=canary)
    plan = report.plan
    sentence = (
        f"every member runs revision {plan.group_revision}, but the canary (a fixed prompt at temperature 0)"
        f" {canary.note}: `pulumi up` does nothing (the config did not change)"
    )
    return replace(report, canary=canary, state="answers changed", sentence=sentence)


def model_report(plan: DeploymentPlan, outputs: dict, seen: GroupReading) -> ModelReport:
    """Judge one model's group from its reading of its nodes; `outputs`: that model's stack outputs ({} before
    `up`). Its canary is judged after (`with_canaries`)."""
    statuses, health, supervised = seen.statuses, seen.health, seen.supervised
    state, sentence = verdict(plan, statuses, health, own_state_id(outputs))
    if supervised is not None and supervised.gave_up and state != "in sync":
        # The group is stopped on purpose: say why, and what to do, before what differs.
        state, sentence = "supervisor gave up", f"{supervised.gave_up_sentence()} ({sentence})"
    restarting = supervised.restarting if supervised is not None else None
    if restarting is not None and restarting.get("cause") == WEDGED and state != "in sync":
        # The supervisor's record: it found the group wedged and is restarting it.
        state, sentence = (
            "wedged",
            f"the supervisor found the group {restarting.get('reason', 'wedged')} and is restarting it (since"
            f" {restarting.get('at', '?')}); no `pulumi up` is needed: ask `spark-llm status` again in a minute",
        )
    elif restarting is not None and state in ("drift", "unhealthy", "failed_start", "wedged"):
        # What differs is the supervisor's restart at work: `pulumi up` would only race it.
        state, sentence = (
            "restarting",
            (
                f"the supervisor is restarting the group (since {restarting.get('at', '?')}:"
                f" {restarting.get('reason', '?')}); no `pulumi up` is needed: ask `spark-llm status` again in a minute"
            ),
        )
    fallback = fabric_fallbacks(health.last_start, plan.group_revision) if health is not None else None
    if fallback is not None and state == "in sync":
        # Serving, but not on the fabric the stack asked for: slow beats down, and it is said loudly (exit 1).
        state, sentence = "off the fabric", fallback_sentence(*fallback)
    watcher = health.supervisor if health is not None else ""
    if state == "in sync" and watcher not in ("", "running"):
        # The group serves, but nothing would restart it after a reboot or a crash.
        state, sentence = (
            "drift",
            (
                f"every member runs revision {plan.group_revision}, but the supervisor's container on {plan.head.name}"
                f" is {watcher}: `pulumi up` starts it again (`pulumi preview` says so)"
            ),
        )
    if state in ("drift", "not deployed") and (refused := refusals(plan, seen.observations)):
        sentence += refused_sentence(refused)
    hosts = {s.node: s.host for s in statuses if s.host}
    if state in ("drift", "not deployed") and (faults := fabric_faults(plan, hosts)):
        # The rule preview refuses a start on (and the supervisor holds its restart on): not a promise `up` breaks.
        problems = "; ".join(fault.problem for fault in faults)
        sentence += f"; but {problems}: `pulumi up` would refuse the start before anything stops (preview says the fix)"
    walls = firewall_drift(plan, seen.observations) + clock_drift(plan, seen.observations)
    if walls and state == "in sync":
        # Preview's reading, preview's words: the table (or the cap) goes back, the engines run on.
        state, sentence = "drift", "; ".join(walls)
    weights = weights_drift(plan, seen.observations)
    if weights and state == "in sync":
        # Preview's reading, preview's words: the copy runs again, then the group restarts on verified weights.
        state, sentence = (
            "drift",
            f"{'; '.join(weights)}: `pulumi up` copies the weights again, verifies them on every node and restarts"
            " the group in order (`pulumi preview` shows it)",
        )
    timeline = outputs.get("start_timeline") or {}
    # What changed on the hosts since the last start that served (spark_llm.plan.host_record): a warning, not a state.
    changes = host_changes(timeline.get("hosts") or {}, {s.node: s.host for s in statuses if s.host})
    host_warning = changes_warning(changes, timeline.get("at", "?")) if changes else ""
    return ModelReport(
        plan,
        state,
        sentence,
        statuses,
        health,
        supervised,
        watcher,
        timeline,
        changes,
        host_warning,
        canary_verdict(None, None),
        weights,
    )
