"""Pure: what a `pulumi up` command line asks of the engine group (issue 31, 7).

`pulumi up --target` runs only what it names: with a pending change, targeting a worker's container replaced that
worker alone; the head was never stopped or started, its engine died when its rank left, and `up` exited 0. And
`--replace` of one member did not stop the supervisor or the other members first. The program reads the CLI's own
command line (spark_llm.remote.pulumi_process) and answers:
- a `--target` (or `--target-replace`) that names a resource of the engine group, or a pattern that may: refused
  before anything runs, with the commands that restart the group in order;
- a `--replace` of a member's container: the whole group restarts in order (a new generation: the supervisor
  stopped, every member stopped, the workers started, the head started, the readiness gate), as `spark-llm restart`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spark_llm.group.flags import flag_values

GROUP_TYPE = "spark-llm:components:EngineGroup"
CONTAINER_TYPE = "docker:index/container:Container"
TARGET_FLAGS = ("--target", "-t", "--target-replace")
REPLACE_FLAGS = ("--replace", "--target-replace")


def engine_component(unit: str | None) -> str:
    """The name of a group's engine component (components.cluster names it `<cluster>-engine`): `spark-engine`, or
    `spark-<key>-engine` for a model of several (__main__.py names its cluster `spark-<key>`). What a `--replace`
    URN is matched against, here and in `spark-llm restart`."""
    return "spark-engine" if unit is None else f"spark-{unit}-engine"


@dataclass(frozen=True)
class GroupRequest:
    refusal: str | None = None
    """Why this command must not run (None: it may)."""
    replaced: tuple[str, ...] = ()
    """The members whose container the command replaces (`--replace`): the whole group then restarts in order."""


def _member(urn: str, members: Sequence[str], component: str) -> str | None:
    """The member whose engine container `urn` names (None: another resource)."""
    if GROUP_TYPE not in urn or CONTAINER_TYPE not in urn:
        return None
    name = urn.rsplit("::", 1)[-1].removeprefix(f"{component}-")
    return name if name in members else None


def group_request(argv: Sequence[str], members: Sequence[str], component: str = "spark-engine") -> GroupRequest:
    """Pure: what the `pulumi` command line `argv` asks of the engine group of `members` (node names)."""
    command = next((w for w in argv[1:] if w in ("up", "update", "preview")), None)
    if command is None:
        return GroupRequest()
    targets = [t for t in flag_values(argv, TARGET_FLAGS) if GROUP_TYPE in t or "*" in t]
    if targets:
        return GroupRequest(
            refusal=(
                f"`pulumi {command} --target {targets[0]}` would run only part of the engine group: one member"
                " would restart alone while the others run on, which breaks the group (its ranks are one process"
                " group). Nothing was run. Restart the group in order with `spark-llm restart`, or run `pulumi up`"
                " without --target (`--replace` of a member's container also restarts the whole group in order)."
            )
        )
    replaced = [m for urn in flag_values(argv, REPLACE_FLAGS) if (m := _member(urn, members, component))]
    return GroupRequest(replaced=tuple(dict.fromkeys(replaced)))
