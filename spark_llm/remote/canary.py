"""Ask the canary (spark_llm.group.canary) on the head: the readiness gate records it, `spark-llm status` compares.

Both ask the same way: curl on the head against rank 0 at the address the head reaches it (as the gate's probe),
so no port needs to be open outside and the answer does not depend on where the operator runs the command.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from spark_llm.group.canary import CanaryRecord, parse_answer, request_body
from spark_llm.group.serving import COMPLETIONS_PATH
from spark_llm.plan.hosts import SshHost
from spark_llm.plan.observation import grouped_script, split_probe
from spark_llm.plan.readiness import ReadinessSpec
from spark_llm.remote.runner import run, run_script
from spark_llm.remote.ssh import RemoteError

REQUEST_SECONDS = 30


def completion_command(address: str, port: int, body: dict, api_key: str | None, seconds: float) -> str:
    """On the head: curl of one completion against rank 0; prints the response body, then ` HTTP<code>`. The
    readiness gate's probe and the canary both ask this way.

    With an API key the header reaches curl through a file descriptor (`-H @<(printf ...)`, printf being a bash
    builtin): the key travels in the script over ssh's stdin and is on no command line on the head.
    """
    auth = f"-H @<(printf 'Authorization: Bearer %s\\n' {shlex.quote(api_key)}) " if api_key else ""
    return (
        f"curl -sS -m {seconds:g} -o - -w ' HTTP%{{http_code}}' {auth}"
        f"http://{address}:{int(port)}{COMPLETIONS_PATH} "
        f"-H 'Content-Type: application/json' -d {shlex.quote(json.dumps(body))}"
    )


def canary_script(address: str, port: int, model: str, api_key: str | None, seconds: float = REQUEST_SECONDS) -> str:
    """On the head: the canary completion (parse_answer reads what it prints)."""
    return completion_command(address, port, request_body(model), api_key, seconds) + " 2>&1 || true\n"


def _record(output: str, revision: str, nodes: Sequence[str]) -> CanaryRecord:
    answer, error = parse_answer(output)
    at = datetime.now(UTC).isoformat(timespec="seconds")
    return CanaryRecord(answer, revision, tuple(nodes), at, error)


def gate_canary(
    spec: ReadinessSpec,
    head: SshHost,
    nodes: Sequence[str],
    say: Callable[[str], None],
    seconds: float | None = None,
) -> dict:
    """The readiness gate's canary, right after rank 0 answered: the record (as JSON) for the start's timeline.

    A canary that gets no answer within `seconds` (default REQUEST_SECONDS) is in the record (it says why); the
    gate then asks again until rank 0 answers or the wedge bound passes (spark_llm.remote.gate_probe).
    """
    seconds = seconds or REQUEST_SECONDS
    script = canary_script(spec["address"], spec["port"], spec["model"], spec["api_key"] or None, seconds)
    try:
        output = run_script(head, script, timeout=seconds + 30)
    except RemoteError as err:
        output = f"(could not ask: {str(err).splitlines()[0]})"
    record = _record(output, spec["revision"], nodes)
    say(f"[{head.name}] canary: {record.answer!r}" if not record.error else f"[{head.name}] canary: {record.error}")
    return record.to_json()


@dataclass(frozen=True)
class CanaryAsk:
    """One group's canary to ask on the head (`spark-llm status`, for a group in sync)."""

    address: str
    port: int
    model: str
    api_key: str | None
    revision: str
    nodes: tuple[str, ...]


def ask_canaries(head: SshHost, asks: Sequence[CanaryAsk]) -> list[CanaryRecord]:
    """Every group's canary now (`spark-llm status`), over the operator's own ssh in one session on the head, as
    every operator command's: the records in the order asked."""
    if not asks:
        return []
    script = grouped_script([(i, canary_script(a.address, a.port, a.model, a.api_key)) for i, a in enumerate(asks)])
    result = run(head, script, timeout=REQUEST_SECONDS * len(asks) + 30)
    answers = split_probe(result.stdout) if result.ok else {}
    failed = f"(could not ask: ssh exit {result.code}: {result.stderr.strip()[-200:]})"
    return [_record(answers.get(i, failed) if result.ok else failed, a.revision, a.nodes) for i, a in enumerate(asks)]
