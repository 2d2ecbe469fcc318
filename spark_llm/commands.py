"""pulumi-command resources with the lifecycle every step here needs.

pulumi-command replaces a Command only when its `triggers` change; any other input change is an update that runs
`update` (or, without one, `create` again). Two consequences shape every step:
- what a step does is in its triggers (the digest of its script and of its stdin): an edited script or new
  content re-runs it, as a replacement;
- its `update` only reports: the one input that changes without a trigger is the connection (a new key, user or
  port), and that must not re-run a transfer or restart anything. The update records the new connection, so
  later deletes use it.
Scripts and their data go over `stdin` (bash reads the script from it), never on a command line or in
`environment` (sshd drops variables its AcceptEnv does not list).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pulumi
import pulumi_command as command

# What an update (a changed connection, nothing else) runs: it only says so.
CONNECTION_UPDATED = "echo 'spark-llm: connection settings recorded (nothing to re-run)'"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _digest(value: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.from_input(value).apply(sha256_text)


def bash_stdin(script: str) -> str:
    """The script as bash reads it from stdin: strict mode, and nothing after it is read as input."""
    return "set -euo pipefail\n" + script


class NodeCommand(command.remote.Command):
    """A bash script run on a node over ssh (on stdin), replaced (re-run) when the script or `triggers` change.

    `delete`, if given, runs when the step is replaced or destroyed (with the connection of the last `up`).
    `secret`: the script carries a secret (it is encrypted in state, and so is its digest).
    """

    def __init__(
        self,
        name: str,
        *,
        connection: command.remote.ConnectionArgs,
        script: pulumi.Input[str],
        delete: str | None = None,
        triggers: Sequence[pulumi.Input[object]] = (),
        secret: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        stdin = pulumi.Output.from_input(script).apply(bash_stdin)
        digest = _digest(script)
        if secret:
            stdin = pulumi.Output.secret(stdin)
            digest = pulumi.Output.secret(digest)
        super().__init__(
            name,
            connection=connection,
            create="bash -s",
            update=CONNECTION_UPDATED,
            delete=delete,
            stdin=stdin,
            triggers=[digest, *triggers],
            # Progress lines (stdout) stream into `pulumi up` as the step runs; a failure's details go to stderr and
            # show once, in the step's error (which carries both streams).
            logging=command.remote.Logging.STDOUT,
            # No $PULUMI_COMMAND_STDOUT in the next run's environment: sshd would refuse it (AcceptEnv).
            add_previous_output_in_env=False,
            opts=opts,
        )
