"""A member's engine log, read one way: the `docker logs` command line every reader runs on a node (`spark-llm
logs`, the readiness gate's tails and start watch, the supervisor on a worker), and the same request on the Docker
API for the supervisor on the head. Engines log to stderr: it is merged into the text read."""

from __future__ import annotations

import shlex


def logs_command(
    container: str, *, tail: int | None = None, since: str | None = None, timestamps: bool = False, follow: bool = False
) -> str:
    """`docker logs` of `container` with stderr merged. `since`: Docker's --since (a time, or "0" for all);
    `timestamps`: each line prefixed by the time the container wrote it (spark_llm.group.times.split_stamp)."""
    words = ["docker", "logs"]
    if timestamps:
        words.append("--timestamps")
    if since is not None:
        words += ["--since", since]
    if tail is not None:
        words += ["--tail", str(int(tail))]
    if follow:
        words.append("--follow")
    return shlex.join([*words, container]) + " 2>&1"


def api_logs_path(container: str, tail: int, since: int | None = None) -> str:
    """The same as `logs_command(container, tail=tail, since=since)`, asked of the Docker API (its socket)."""
    after = f"&since={int(since)}" if since is not None else ""
    return f"/containers/{container}/logs?stdout=1&stderr=1&tail={int(tail)}{after}"
