"""Pure: from what the nodes run now (spark_llm.observe) to the tokens that make Pulumi repair drift, and only drift.

pulumi-command re-runs a step only when its triggers change, and reads nothing back. So each step that can drift
(an image removed, a weights file changed, a container that died) has a *token* in its triggers (or, for the
engine containers, in their labels), and records it on the node when it succeeds, with the value it established
(`TOKEN VALUE`: an image ID, a manifest digest). At the next program run:
- the node still has that value: the token is the recorded one, unchanged, so nothing runs;
- it does not (removed, changed, never recorded): the token is `repair-<digest of what was seen>`, new, so
  Pulumi replaces the step (preview shows it), and the step records that token once it has repaired the node.
The node remembers the token, so a repair is followed by a no-op, not by another run.
"""

from __future__ import annotations

import hashlib
import shlex

from spark_llm.observe import TOKENS_DIR, NodeObservation

REPAIR_PREFIX = "repair-"
# The token when the program cannot look (unit tests with mocks, or observation switched off).
UNOBSERVED = "unobserved"


def _repair(why: str) -> str:
    return REPAIR_PREFIX + hashlib.sha256(why.encode()).hexdigest()[:12]


def step_token(observation: NodeObservation | None, step: str, live: str | None) -> tuple[str, str | None]:
    """The token for `step` on a node, and why it is a repair (None when the node is as the step left it).

    `live`: the value the node has now (image ID, manifest digest), None when absent.
    """
    if observation is None:
        return UNOBSERVED, None
    if observation.error is not None:
        why = f"{observation.node} could not be read: {observation.error}"
        return _repair(why), why
    recorded = observation.tokens.get(step, "")
    token, _, value = recorded.partition(" ")
    if not token:
        why = f"{step} has not run on {observation.node} yet"
    elif live is None:
        why = f"{step} on {observation.node}: gone (was {value})"
    elif live != value:
        why = f"{step} on {observation.node}: now {live}, was {value}"
    else:
        return token, None
    return _repair(f"{why} [{recorded}]"), why


def record_token_script(remote_dir: str, step: str, token: str, value_expr: str) -> str:
    """Bash that records `TOKEN VALUE` for `step` on the node (atomically); `value_expr` is a bash expression."""
    directory = shlex.quote(f"{remote_dir}/{TOKENS_DIR}")
    path = f"{directory}/{shlex.quote(step)}"
    return (
        f"mkdir -p {directory}\n"
        f'printf "%s %s\\n" {shlex.quote(token)} "{value_expr}" > {path}.tmp\n'
        f"mv -f {path}.tmp {path}\n"
    )


def first_run(observation: NodeObservation | None, step: str) -> bool:
    """True when the node was read and `step` never recorded a token there: a first deployment, not drift
    (worth an info line, not a warning)."""
    return observation is not None and observation.error is None and step not in observation.tokens
