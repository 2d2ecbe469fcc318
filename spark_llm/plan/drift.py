"""Pure: from what the nodes run now (plan.observation) to the tokens that make Pulumi repair drift, and only drift.

pulumi-command re-runs a step only when its triggers change, and reads nothing back. So each step that can drift
(an image removed, a weights file changed, a container that died) has a *token* in its triggers (or, for the
engine containers, in their labels), and records it on the node when it succeeds, with the value it established
(`TOKEN VALUE`: an image ID, a manifest digest). At the next program run:
- the node still has that value: the token is the recorded one, unchanged, so nothing runs;
- it does not (removed, changed, never recorded): the token is `repair-<digest of what was seen and of this
  program run>`, new, so Pulumi replaces the step (preview shows it), and the step records that token once it has
  repaired the node.
The node remembers the token, so a repair is followed by a no-op, not by another run. A repair token is new at
every program run (NodeObservation.run): a node that lost its records (another state's `pulumi destroy` on the
same nodes, a state restored from a backup) must never compute the very token this state saved when it first
deployed there, or `up` would call a node that has nothing "unchanged".
"""

from __future__ import annotations

import hashlib
import shlex

from spark_llm.group.members import UNREACHABLE, Member
from spark_llm.group.verdict import RESTART, WHOLE, judge
from spark_llm.group.weights import UNVERIFIED as UNVERIFIED
from spark_llm.plan.container import LABEL_GENERATION, LABEL_REVISION
from spark_llm.plan.nodes import NodePlan
from spark_llm.plan.observation import TOKENS_DIR, NodeObservation

REPAIR_PREFIX = "repair-"
# The token when the program cannot look (unit tests with mocks, or observation switched off).
UNOBSERVED = "unobserved"
# UNVERIFIED (spark_llm.group.weights): the record a step leaves while it changes what it recorded (the weights
# fan-out, before its first byte to a worker): until it records the verified value again, the node's state is no
# step's (issue 31, 2). Spelled in the group's room, as the supervisor reads it too; re-exported here for the steps.


# The step that records which state started a node's engine container: `STATE_ID CONTAINER_ID` (the watch step
# writes it once the container is created; components.bootstrap names engines another state started).
OWNER_STEP = "engine-owner"


def owner_record(line: str) -> tuple[str, str]:
    """Pure: an OWNER_STEP record -> (state id, container id); empty strings when there is none."""
    owner, _, container = line.strip().partition(" ")
    return owner, container.strip()


def repair_token(why: str, run: str) -> str:
    """A repair's token: new at every program run (`run`), so Pulumi replaces the step that carries it."""
    return REPAIR_PREFIX + hashlib.sha256(f"{why}\0{run}".encode()).hexdigest()[:12]


def step_token(observation: NodeObservation | None, step: str, live: str | None) -> tuple[str, str | None]:
    """The token for `step` on a node, and why it is a repair (None when the node is as the step left it, or when
    it could not be read: components.bootstrap says that once per node, not once per step).

    `live`: the value the node has now (image ID, manifest digest), None when absent.
    """
    if observation is None:
        return UNOBSERVED, None
    if observation.error is not None:
        return repair_token(f"{observation.node} could not be read: {observation.error}", observation.run), None
    recorded = observation.tokens.get(step, "")
    token, _, value = recorded.partition(" ")
    if token == UNVERIFIED:
        why = f"{step} on {observation.node}: a copy began and was not verified (cut short)"
    elif not token:
        why = f"{step} has not run on {observation.node} yet"
    elif live is None:
        why = f"{step} on {observation.node}: gone (was {value})"
    elif live != value:
        why = f"{step} on {observation.node}: now {live}, was {value}"
    else:
        return token, None
    return repair_token(f"{why} [{recorded}]", observation.run), why


def record_token_script(remote_dir: str, step: str, token: str, value_expr: str) -> str:
    """Bash that records `TOKEN VALUE` for `step` on the node (atomically); `value_expr` is a bash expression."""
    directory = shlex.quote(f"{remote_dir}/{TOKENS_DIR}")
    path = f"{directory}/{shlex.quote(step)}"
    return (
        f"mkdir -p {directory}\n"
        f'printf "%s %s\\n" {shlex.quote(token)} "{value_expr}" > {path}.tmp\n'
        f"mv -f {path}.tmp {path}\n"
    )


def owner_watch_script(node: NodePlan, state_id: str, container_id: str) -> str:
    """The watch step after a node's engine container is created: record which state started it (before watching:
    it did, whether or not it survives its start), then `launch.sh watch` for the startup grace.

    A member that stops within the grace does not fail this step: the readiness gate, which runs after the head's,
    sees it stopped at its first poll and fails the start as it fails every start (issue 31, 5): the member that
    stopped first named, every node's last lines, a failure record on the head (what preview and status then say),
    and the rollback command or the rollback itself. Failing here had left one line, no record and no way back.
    `state_id`: empty while this state has none (recorded as `unknown`)."""
    said = shlex.quote(
        f"spark-llm: the engine on {node.name} stopped within the startup grace; the readiness gate names the cause"
    )
    return record_token_script(node.remote_dir, OWNER_STEP, state_id or "unknown", container_id) + (
        f"{node.script_path} watch {shlex.quote(node.name)} 2>/dev/null || echo {said}\n"
    )


def group_members(
    observations: dict[str, NodeObservation], members: list[tuple[str, str]], others: list[str] | tuple[str, ...] = ()
) -> list[Member]:
    """Pure: the group's members as the program's probe read them (spark_llm.group.members), in rank order.

    `others`: nodes whose running engine another state of this stack started (`engines_of_other_states`)."""
    out = []
    for node, role in members:
        seen = observations[node]
        engine = seen.engine
        if seen.error is not None:
            out.append(Member(node, role, UNREACHABLE, error=seen.error))
            continue
        out.append(
            Member(
                node,
                role,
                engine.status,
                exit_code=engine.exit_code,
                started_at=engine.started_at,
                finished_at=engine.finished_at,
                oom_killed=engine.oom_killed,
                rollout=engine.labels.get(LABEL_GENERATION, ""),
                foreign="another state of this stack" if node in others else "",
            )
        )
    return out


def group_generation(
    observations: dict[str, NodeObservation] | None,
    members: list[tuple[str, str]],
    others: list[str] | tuple[str, ...] = (),
) -> tuple[str, str | None]:
    """The engine group's generation label, and why it is new (None: every member runs as `pulumi up` left it).

    `members`: (node, role) in rank order. The group's verdict (spark_llm.group.verdict, with the restart policy:
    `up` recreates what is absent or another's): whole, and the generation is the one every member carries;
    otherwise it is new and every container is replaced, in order (spark_llm.group.order). `others`: nodes whose
    running engine another state of this stack started (`engines_of_other_states`): this state's containers are
    gone there.
    """
    if observations is None:
        return UNOBSERVED, None
    group = group_members(observations, members, others)
    verdict = judge(group, RESTART)
    if verdict.state == WHOLE:
        return group[0].rollout, None
    generations = sorted({m.rollout for m in group})
    run = next((o.run for o in observations.values()), "")
    return repair_token(verdict.why + repr(generations), run), verdict.why


def restart_pending(
    observations: dict[str, NodeObservation] | None,
    members: list[str],
    labels: dict[str, str],
    image_id: str,
) -> str | None:
    """Why this `pulumi up` stops the group (None: every member runs the container it plans, and nothing stops).

    The stop steps run when their triggers change: the group's restart inputs, which every member's container
    carries as labels (`labels`: each planned label's value) and as its image (`image_id`). A member whose
    container lacks one of them (not running, another value, not read) is one this `up` replaces, after stopping
    the group. pulumi-command cannot say what a step last ran with; the containers can, whatever a failed `up`
    left behind (issue 41, 3: an `up` that failed after some admission steps passed left them recorded, and the
    next `up` stopped the group without judging those nodes again)."""
    if observations is None:
        return None
    for node in members:
        seen = observations.get(node)
        if seen is None or seen.error is not None:
            return f"{node} could not be read"
        engine = seen.engine
        if not engine.running:
            return f"the engine on {node} is {engine.status}"
        changed = sorted(k for k, v in labels.items() if engine.labels.get(k) != v)
        if changed:
            return f"the engine on {node} runs another {', '.join(changed)}"
        if engine.image_id and image_id and engine.image_id != image_id:
            return f"the engine on {node} runs another image ({engine.image_id[:19]})"
    return None


def replaced_generation(generation: str, replaced: tuple[str, ...], run: str) -> str:
    """Pure: the group's generation when this run `--replace`s members (spark_llm.plan.cli_flags): new at every
    such run, so the whole group restarts in order, not just the members named."""
    return (
        REPAIR_PREFIX + hashlib.sha256(f"{generation}\0replace {','.join(replaced)}\0{run}".encode()).hexdigest()[:12]
    )


def foreign_containers(observations: dict[str, NodeObservation] | None) -> list[str]:
    """Nodes whose container named like the engine's was not started by this spark-llm (no generation label): by
    hand, as in the seeds, or by a spark-llm before the docker provider."""
    if observations is None:
        return []
    return [
        o.node
        for o in observations.values()
        if o.engine.status != "absent" and LABEL_GENERATION not in o.engine.labels and o.error is None
    ]


def engines_of_other_states(observations: dict[str, NodeObservation] | None, state_id: str | None) -> list[str]:
    """Nodes running a spark-llm engine (generation label) that this state did not start.

    `state_id`: this state's identity (components.state_identity), None while it has none yet (a state that never
    deployed: every engine running there is another state's). A known state claims an engine unless the node's
    owner record (OWNER_STEP) names that very container and another state; an engine with no record (started by a
    spark-llm before owners were recorded) is left to the generation check.
    """
    if observations is None:
        return []
    others = []
    for o in observations.values():
        if o.error is not None or not o.engine.running or LABEL_GENERATION not in o.engine.labels:
            continue
        owner, container = owner_record(o.tokens.get(OWNER_STEP, ""))
        if state_id is None or (container == o.engine.container_id and owner not in ("", state_id)):
            others.append(o.node)
    return others


def first_run(observation: NodeObservation | None, step: str) -> bool:
    """True when the node was read and `step` never recorded a token there: a first deployment, not drift
    (worth an info line, not a warning)."""
    return observation is not None and observation.error is None and step not in observation.tokens


def state_behind_nodes(
    observations: dict[str, NodeObservation] | None,
    recorded: object,
    revision: str,
    others: list[str] | tuple[str, ...] = (),
) -> str | None:
    """Pure: what preview says when the state is older than the nodes (issue 31, 10: after `pulumi stack import` of
    an older export it said nothing, and the nodes already ran the newer revision). `recorded`: the state's
    `container_ids` output (node -> ID). Said when every node runs this config's revision in a container the state
    does not record, none of them another state's; None otherwise."""
    if not observations or not isinstance(recorded, dict) or not recorded or others:
        return None
    for node, seen in observations.items():
        engine = seen.engine
        if seen.error is not None or not engine.running or engine.labels.get(LABEL_REVISION) != revision:
            return None
        if engine.container_id in recorded.values() or engine.container_id.startswith(str(recorded.get(node, "-"))):
            return None
    ids = ", ".join(f"{node} {str(cid)[:12]}" for node, cid in sorted(recorded.items()))
    return (
        f"every node already runs revision {revision} (this config's), in containers this state does not record"
        f" ({ids}): the state is older than the nodes (a `pulumi stack import` of an older export, or a restored"
        " backup). `pulumi up` brings it level, restarting the group in order once."
    )
