"""EngineContainer: one node's engine container, started and stopped by the launch script.

Drift is judged for the whole group, not per container: a member counts as healthy only if every member's
container runs with the current group revision and the head started after every worker. So one dead or
hand-restarted member makes every member drift, and `pulumi up` restarts the group in order (the head alone
would rejoin nothing: the engines' process group dies with any member).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pulumi
from pulumi.dynamic import Resource

from spark_llm.remote import _CommandProvider, command_props
from spark_llm.ssh import RemoteError, SshHost, run_script


def _member_status(member: dict) -> str:
    script = f"{member['script_path']} status {member['name']}\n"
    try:
        out = run_script(SshHost.from_props(member["connection"]), script, stream=False, timeout=60).strip()
        return out.splitlines()[-1] if out else "absent"
    except RemoteError as err:
        return f"unreachable ({str(err).splitlines()[0]})"


def judge_group(statuses: dict[str, str], head: str, revision: str) -> str | None:
    """Pure: from each member's `launch.sh status` line, None if the group is whole, else what is wrong."""
    started: dict[str, str] = {}
    for name, status in statuses.items():
        fields = status.split()
        if not fields or fields[0] != "running":
            return f"{name} is {status or 'absent'}; the group restarts in order"
        if len(fields) < 4 or fields[3] != revision:
            return f"{name} runs group revision {fields[3] if len(fields) > 3 else '?'}, not {revision}"
        started[name] = fields[2]
    late = [name for name, at in started.items() if name != head and at > started[head]]
    if late:
        return f"{', '.join(late)} restarted after the head, outside the group; the group restarts in order"
    return None


def group_problem(members: list[dict], revision: str) -> str | None:
    """Read every member's status (in parallel, read-only) and judge the group."""
    with ThreadPoolExecutor(max_workers=max(len(members), 1)) as pool:
        statuses = dict(zip([m["name"] for m in members], pool.map(_member_status, members), strict=True))
    head = next(m["name"] for m in members if m["role"] == "head")
    return judge_group(statuses, head, revision)


class _ContainerProvider(_CommandProvider):
    def _drift(self, olds: dict, news: dict) -> str | None:
        return group_problem(news["group"], news["group_revision"])


class EngineContainer(Resource, module="spark-llm", name="EngineContainer"):
    """The engine container on one node; `stdout` ends with its container ID."""

    stdout: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        connection: dict,
        start: str,
        stop: str,
        group: list[dict],
        group_revision: str,
        triggers: pulumi.Input[list],
        label: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = command_props(
            connection=connection,
            create=start,
            delete=stop,
            triggers=triggers,
            label=label,
            group=group,
            group_revision=group_revision,
        )
        super().__init__(_ContainerProvider(), name, props, opts)
