"""`spark-llm status`'s router line (spark-llm:router): its container on the head, and the models it lists.

The models it lists are what a client is routed to: a router that runs but lists one model fewer than the stack
serves answers that model's requests with an error (its engine is out of its list until the launcher registers it
again: sim/router/launch.py), so status names the missing one. `/v1/models` answers without the key (names only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from spark_llm.ops.sections import parse_sections
from spark_llm.plan.router import RouterPlan
from spark_llm.remote.runner import NodeRun, failure_of, quote


@dataclass(frozen=True)
class RouterStatus:
    state: str
    """running, exited, absent, ... (docker's), or `unreachable` when the head did not answer."""
    listed: tuple[str, ...]
    """The models its /v1/models lists (empty when it did not answer)."""
    expected: tuple[str, ...]
    """The stack's models, each of which it should list."""
    endpoint: str
    error: str = ""

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(m for m in self.expected if m not in self.listed)

    @property
    def ok(self) -> bool:
        return self.state == "running" and not self.missing

    def sentence(self) -> str:
        if self.state == "unreachable":
            return f"router: the head did not answer ({self.error})"
        if self.state != "running":
            return (
                f"router: its container on the head is {self.state}: `pulumi up` makes it again (with the supervisor"
                " on, the supervisor does within a minute)"
            )
        listed = ", ".join(self.listed) or "no model"
        if self.missing:
            return (
                f"router: running at {self.endpoint}, lists {listed}; not {', '.join(self.missing)}: its launcher"
                " registers an engine again within seconds once it answers (`spark-llm logs` of that model)"
            )
        return f"router: running at {self.endpoint}, lists {listed}"

    def to_json(self) -> dict:
        return {
            "state": self.state,
            "endpoint": self.endpoint,
            "listed": list(self.listed),
            "missing": list(self.missing),
        }


def router_lines(router: RouterPlan) -> list[str]:
    """Read-only, on the head, in its status script: the container's state and what it lists."""
    fmt = quote("{{.State.Status}}")
    return [
        f"capture router_state docker inspect -f {fmt} {quote(router.container)}",
        f"capture router_models curl -sS -m 5 -f http://127.0.0.1:{router.port}/v1/models",
    ]


def parse(text: str, expected: tuple[str, ...], endpoint: str) -> RouterStatus:
    """Pure: what the head's script printed -> the router's status."""
    sections = parse_sections(text)
    state_section = sections.get("router_state")
    state = state_section.first_line.strip() if state_section is not None and state_section.ok else "absent"
    listed: tuple[str, ...] = ()
    models = sections.get("router_models")
    if models is not None and models.ok:
        try:
            listed = tuple(sorted(entry["id"] for entry in json.loads(models.body)["data"]))
        except (ValueError, KeyError, TypeError):
            listed = ()
    return RouterStatus(state, listed, expected, endpoint)


def router_status(head: NodeRun, router: RouterPlan, expected: tuple[str, ...], endpoint: str) -> RouterStatus:
    """Pure: the router's status from the head's run of its status script (spark_llm.ops.status.read)."""
    if head.ssh_failed:
        failure = failure_of(head)
        return RouterStatus("unreachable", (), expected, endpoint, f"{failure.kind}: {failure.message}")
    return parse(head.stdout, expected, endpoint)
