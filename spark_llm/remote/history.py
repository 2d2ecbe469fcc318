"""The head's history of starts over ssh: the one read and the one append (spark_llm.group.history says what a line
is). A history that cannot be read is an empty one; one that cannot be written costs only the history."""

from __future__ import annotations

from spark_llm.group.history import KEPT, StartRecord, append_script, parse_history, read_script
from spark_llm.plan.hosts import SshHost
from spark_llm.remote.runner import run


def read_history(head: SshHost, path: str, kept: int = KEPT) -> list[StartRecord]:
    """The head's last `kept` starts, oldest first; [] when there are none or the head does not answer."""
    result = run(head, read_script(path, kept), timeout=60)
    return parse_history(result.stdout) if result.ok else []


def append_history(head: SshHost, path: str, record: StartRecord) -> None:
    """Append `record` to the head's history, keeping the last KEPT lines."""
    run(head, append_script(path, record), timeout=60)
