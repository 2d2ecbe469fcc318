"""A member's engine log, read one way: the `docker logs` command line every reader runs on a node (`spark-llm
logs`, the readiness gate's tails and start watch, the supervisor on a worker), and the same request on the Docker
API for the supervisor on the head. Engines log to stderr: it is merged into the text read."""

from __future__ import annotations

import shlex


def logs_command(
    container: str,
    *,
    tail: int | None = None,
    since: str | None = None,
    since_start: bool = False,
    timestamps: bool = False,
    follow: bool = False,
) -> str:
    """`docker logs` of `container` with stderr merged. `since`: Docker's --since (a time, or "0" for all);
    `since_start`: the lines of the container's current run only (--since its StartedAt, read by the same line);
    `timestamps`: each line prefixed by the time the container wrote it (spark_llm.group.times.split_stamp)."""
    if since is not None and since_start:
        raise ValueError("logs_command: give `since` or `since_start`, not both")
    words = ["docker", "logs"]
    if timestamps:
        words.append("--timestamps")
    if since is not None:
        words += ["--since", since]
    line = shlex.join(words)
    if since_start:
        # A container started again in place (`docker start`, a restart policy) keeps every run's lines; its
        # StartedAt is this run's, read by the same line on the node's clock, the one Docker compares it with.
        started = shlex.join(["docker", "inspect", "-f", "{{.State.StartedAt}}", container])
        line += f' --since "$({started} 2>/dev/null)"'
    rest = []
    if tail is not None:
        rest += ["--tail", str(int(tail))]
    if follow:
        rest.append("--follow")
    return f"{line} {shlex.join([*rest, container])} 2>&1"


def api_logs_path(container: str, tail: int, since: int | None = None) -> str:
    """The same as `logs_command(container, tail=tail, since=since)`, asked of the Docker API (its socket)."""
    after = f"&since={int(since)}" if since is not None else ""
    return f"/containers/{container}/logs?stdout=1&stderr=1&tail={int(tail)}{after}"
