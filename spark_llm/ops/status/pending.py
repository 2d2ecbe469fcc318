"""Operations pending in the stack's state (a `pulumi up` at work, or one killed), and the one command that clears
a killed one's.

Pure. A `pulumi up` killed while a resource was being made (`kill -9`, a closed terminal) leaves the operation in
the state's `pending_operations`; `pulumi cancel` clears the lock, not them, and every later `up` warns of them
again, because a pending *create* is cleared only by a `pulumi refresh` that says what to do with it
(`--clear-pending-creates`, or `--import-pending-creates URN ID`; interactively it asks). A create whose resource
the state holds again (the `up` after the kill made it) is safe to clear: its URN is in the state, made and
recorded. One whose resource the state does not hold may have left something on a node that the state does not
know; clearing it forgets it, so status names it and says to look first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CLEAR = "pulumi refresh --clear-pending-creates --yes"


@dataclass(frozen=True)
class Pending:
    urn: str
    operation: str
    """Pulumi's word: creating, updating, deleting, reading, importing."""
    remade: bool
    """The state holds the resource again (an `up` after the kill made it)."""

    @property
    def name(self) -> str:
        """The resource's name and type (`spark-engine-ready` (command:local:Command))."""
        kind, _, name = self.urn.rpartition("::")
        return f"{name} ({kind.rpartition('$')[2]})"

    def to_json(self) -> dict:
        return {"urn": self.urn, "operation": self.operation, "in_state": self.remade}


def pending_operations(export: Mapping[str, Any]) -> list[Pending]:
    """The pending operations of a `pulumi stack export`, in its order."""
    deployment = export.get("deployment") or {}
    held = {r.get("urn") for r in deployment.get("resources") or [] if isinstance(r, dict)}
    out = []
    for op in deployment.get("pending_operations") or []:
        resource = op.get("resource") if isinstance(op, dict) else None
        urn = resource.get("urn") if isinstance(resource, dict) else None
        if isinstance(urn, str):
            out.append(Pending(urn, str(op.get("type", "")), urn in held))
    return out


def sentence(pending: list[Pending], stack_args: str = "") -> str:
    """What status says of them ("" for none): what is pending, and the command that clears it."""
    if not pending:
        return ""
    listed = ", ".join(f"{p.name} {p.operation}" for p in pending)
    clear = f"`{CLEAR}{stack_args}`"
    unknown = [p for p in pending if not p.remade and p.operation == "creating"]
    # A `pulumi up` at work has its operations pending too (Ctrl-C waits for them): only once none runs are they a
    # killed one's leftovers. The state alone cannot tell the two apart.
    whose = (
        f"{len(pending)} operation(s) pending in the state ({listed}): a `pulumi up` still running has them, or one"
        " that was killed left them. If none runs now"
    )
    if not unknown:
        return (
            f"{whose}: the nodes run what this status shows and the state holds each of them again, so {clear}"
            " clears them (every `up` warns of them until then)"
        )
    names = ", ".join(p.name for p in unknown)
    return (
        f"{whose}: the state does not hold {names}, which may be on a node unrecorded. Run `pulumi up` (it makes"
        f" them again), then {clear}"
    )
