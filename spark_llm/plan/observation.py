"""Pure: what a node runs now, as data, and the one read-only probe script that reads it (`SECTION<TAB>VALUE`).

spark_llm.remote.observe runs the probe on every node over ssh at each program run; spark_llm.plan.drift turns
observations into the tokens that make Pulumi repair drift.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from spark_llm.plan.deployment import DeploymentPlan, NodePlan
from spark_llm.plan.scripts import bash_lib

# Where a step records the token it ran with (spark_llm.plan.drift): one file a step, under the node's remote dir.
TOKENS_DIR = "state"


@dataclass(frozen=True)
class EngineState:
    """The engine container on a node as `docker inspect` shows it."""

    status: str
    """running, exited, created, ... or absent."""
    exit_code: int = 0
    container_id: str = ""
    started_at: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    finished_at: str = ""
    oom_killed: bool = False
    image_id: str = ""
    """The image it was created from (`sha256:...`; empty when not read)."""

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True)
class NodeObservation:
    node: str
    error: str | None = None
    """Why the node could not be read (None: it was)."""
    docker_down: bool = False
    """The node answered over ssh but its Docker engine did not (`error` says what docker said)."""
    host_key_refused: str | None = None
    """The node (this one or its jump host) whose host key ssh refused as not the pinned one; None: none was."""
    engine: EngineState = EngineState("absent")
    image: str = ""
    """`ID OS/ARCH` of the configured image ref on the node; empty when absent."""
    tokens: dict[str, str] = field(default_factory=dict)
    """Step name -> `TOKEN VALUE`, what the step recorded when it last ran on this node (spark_llm.plan.drift)."""
    facts: dict[str, str] = field(default_factory=dict)
    """Other sections a probe printed (`name<TAB>value`), e.g. the weights' live manifest digest."""
    run: str = ""
    """The program run that read the node (one random id a run): a repair's token is new at every run, so a node
    that lost what a step left there can never read as the state's old token (spark_llm.plan.drift)."""

    @property
    def reachable(self) -> bool:
        return self.error is None


# The one reading of a container's state on a node, shared by the program's probe (below), `spark-llm status` and
# `spark-llm preflight`: `engine_state CONTAINER` prints `engine<TAB>JSON` (`parse_probe` reads it; "absent" when
# there is no such container), or `docker<TAB>WHY` and fails when the Docker engine does not answer.
ENGINE_STATE_FUNCTION = bash_lib("engine_state")


def probe_script(plan: DeploymentPlan, node: NodePlan, extra: str = "") -> str:
    """Pure: the read-only script one node runs; every line it prints is `SECTION<TAB>VALUE`.

    `extra`: more read-only bash that prints such lines (its sections land in NodeObservation.facts).
    """
    tokens = f"{node.remote_dir}/{TOKENS_DIR}"
    return (
        ENGINE_STATE_FUNCTION + f"container={shlex.quote(plan.container)}\n"
        f"image={shlex.quote(plan.image.ref)}\n"
        f"tokens={shlex.quote(tokens)}\n"
        'engine_state "$container" || exit 0\n'
        "if out=$(docker image inspect -f '{{.Id}} {{.Os}}/{{.Architecture}}' \"$image\" 2>/dev/null); then\n"
        '  printf "image\\t%s\\n" "$out"\n'
        "fi\n"
        'if [ -d "$tokens" ]; then\n'
        '  for f in "$tokens"/*; do\n'
        '    [ -f "$f" ] && printf "token\\t%s %s\\n" "$(basename "$f")" "$(head -c 512 "$f" | tr -d "\\n\\t")"\n'
        "  done\n"
        "fi\n" + extra + "true\n"
    )


def parse_engine(value: str) -> EngineState:
    """Pure: the JSON of an `engine` line (ENGINE_STATE_FUNCTION) -> the container's state."""
    data = json.loads(value)
    return EngineState(
        status=data.get("status", "absent"),
        exit_code=int(data.get("exit_code", 0)),
        container_id=data.get("container_id", ""),
        started_at=data.get("started_at", ""),
        labels=data.get("labels") or {},
        finished_at=data.get("finished_at", ""),
        oom_killed=bool(data.get("oom_killed", False)),
        image_id=data.get("image_id", ""),
    )


def parse_probe(node: str, output: str, run: str = "") -> NodeObservation:
    """Pure: a node's probe output -> its observation (`run`: the id of the program run that read it)."""
    engine = EngineState("absent")
    image = ""
    tokens: dict[str, str] = {}
    facts: dict[str, str] = {}
    for line in output.splitlines():
        section, _, value = line.partition("\t")
        if section == "docker":
            detail = value.strip() or "no answer"
            return NodeObservation(
                node=node, error=f"its Docker engine does not answer: {detail}", docker_down=True, run=run
            )
        if section == "engine":
            engine = parse_engine(value)
        elif section == "image":
            image = value.strip()
        elif section == "token":
            name, _, content = value.partition(" ")
            tokens[name] = content.strip()
        elif section and value:
            facts[section] = value.strip()
    return NodeObservation(node=node, engine=engine, image=image, tokens=tokens, facts=facts, run=run)


# The line that opens one group's sections in a node's one probe (`observe_stack`): never a section of a probe.
GROUP_MARK = "@spark-llm-group"


def grouped_script(parts: Sequence[tuple[int, str]]) -> str:
    """Pure: one script that runs each part in a subshell of its own (an `exit` ends that part only), after a line
    naming its group's index: every group's reading of a node in one ssh session (`split_probe` splits them)."""
    # The mark starts a line of its own even after a part whose output ends without a newline (curl's `-w`).
    return "".join(f"printf '\\n{GROUP_MARK}\\t%s\\n' {index}\n(\n{script}\n)\n" for index, script in parts)


def stack_probe(groups: Sequence[tuple[DeploymentPlan, str]], node: NodePlan) -> str:
    """Pure: one script for `node` that runs the probe of every group on it (with its `extra`): the program's one
    look at the node (spark_llm.remote.observe.observe_stack)."""
    parts = []
    for index, (plan, extra) in enumerate(groups):
        member = next((n for n in plan.nodes if n.name == node.name), None)
        if member is not None:
            parts.append((index, probe_script(plan, member, extra)))
    return grouped_script(parts)


def split_probe(output: str) -> dict[int, str]:
    """Pure: a stack probe's output -> each group's own lines, by the group's index."""
    found: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        section, _, value = line.partition("\t")
        if section == GROUP_MARK:
            current = found.setdefault(int(value), [])
        elif current is not None:
            current.append(line)
    return {index: "\n".join(lines) + "\n" for index, lines in found.items()}
