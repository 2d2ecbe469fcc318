"""A step's drift token, and what `pulumi preview` says about it: the one place the components log a token's why.

spark_llm.plan.drift decides the token (the recorded one, or a repair) and why; a node read for the first time
is a first deployment (an info line), anything else is drift (a warning). A node that could not be read gets
neither: components.bootstrap names it once, not once per step.
"""

from __future__ import annotations

from collections.abc import Callable

import pulumi

from spark_llm.plan.drift import first_run, step_token
from spark_llm.plan.observation import NodeObservation


def noted_step_token(
    observation: NodeObservation | None,
    step: str,
    live: str | None,
    *,
    on_first_run: Callable[[str], str] | None = None,
    on_drift: Callable[[str], str] | None = None,
) -> str:
    """The token of `step` on a node (spark_llm.plan.drift.step_token); logs `on_first_run(why)` as info when the
    step never ran there, `on_drift(why)` as a warning when the node changed since (None: say nothing)."""
    token, why = step_token(observation, step, live)
    if why and first_run(observation, step):
        if on_first_run is not None:
            pulumi.log.info(on_first_run(why))
    elif why and on_drift is not None:
        pulumi.log.warn(on_drift(why))
    return token
