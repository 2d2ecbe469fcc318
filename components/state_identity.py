"""The identity of this Pulumi state: a random id made once, at the state's first `pulumi up`, and kept in it.

Two states can deploy the same stack to the same nodes (a second checkout on its own backend, a state re-created
after it was lost). Each engine container's node records which state started it (spark_llm.plan.drift.OWNER_STEP), so
the program can tell its own engines from another state's: `pulumi preview` names every engine another state
started before `up` stops it, and a state whose containers another state replaced restarts its own group instead
of calling the other's "unchanged".

A resource with no inputs that ever change: in preview its id is known for any state that has deployed, and
unknown only for a state that never has (then every engine running on the nodes belongs to another state).
"""

from __future__ import annotations

import pulumi
import pulumi_command as command


def state_identity(name: str, opts: pulumi.ResourceOptions) -> command.local.Command:
    """A local step whose stdout is 32 random hex digits, made at create and never again."""
    return command.local.Command(
        name,
        # od and /dev/urandom: on every Linux and macOS workstation, no interpreter path in the input (a new venv
        # path would be an update, and an update that ran `create` again would change the id).
        create="od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'",
        # Should an input ever change, the id stays: pulumi-command runs `update` and keeps its stdout.
        update='printf "%s" "$PULUMI_COMMAND_STDOUT"',
        add_previous_output_in_env=True,
        opts=opts,
    )
