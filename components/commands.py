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

import shlex
from collections.abc import Sequence

import pulumi
import pulumi_command as command

from spark_llm.plan.node_files import sha256_text

# What an update (a changed connection, nothing else) runs: it only says so.
CONNECTION_UPDATED = "echo 'spark-llm: connection settings recorded (nothing to re-run)'"


def run_stdin_script(env: str = "") -> str:
    """The command that runs the script on stdin: read all of it first, then run it (`env`: `VAR=value `).

    Not `bash -s`: pulumi-command feeds stdin to every command (create, update, delete), and its ssh session
    fails with `EOF` when the remote command exits before all of stdin was sent (a short delete, a script that
    exits early). Reading stdin to the end first removes that race.

    pulumi-command opens every failure with this line (`Process exited with status 1: running "..."`), before the
    script's own lines: so it is short, says what it is, and has no `"` (which %q would print as `\\"`). `$f` needs
    no quotes: mktemp's path (under $TMPDIR, else /tmp; sshd sets no TMPDIR) has no spaces.
    """
    return f": spark-llm step, its script on stdin; f=$(mktemp) && cat >$f && {env}bash $f; r=$?; rm -f $f; exit $r"


def discarding_stdin(command_line: str) -> str:
    """A command that does not read the script: stdin is drained first (see `run_stdin_script`)."""
    return f"cat > /dev/null; {command_line}"


def _digest(value: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.from_input(value).apply(sha256_text)


def secret_digest(value: pulumi.Input[str]) -> pulumi.Output[str]:
    """The value's sha256, a secret once known. While unknown (a preview that creates the Ray token it holds) a
    plain unknown: pulumi-command refused an unknown secret inside `triggers` ("triggers[0]: malformed secret:
    missing value"), and the whole preview of a first Ray deployment failed."""
    return pulumi.Output.unsecret(_digest(value)).apply(pulumi.Output.secret)


def bash_stdin(script: str) -> str:
    """The script as bash reads it from stdin: strict mode, and nothing after it is read as input."""
    return "set -euo pipefail\n" + script


# The script's phase when it runs as a step's delete (`delete_phase`); unset at create.
PHASE_ENV = "SPARK_LLM_PHASE"


def _delete_command(delete: str | None, phase: str | None) -> str | None:
    if delete is not None and phase is not None:
        raise ValueError("a step's delete is a command line or its script's phase, not both")
    if phase is not None:
        return run_stdin_script(f"{PHASE_ENV}={shlex.quote(phase)} ")
    return None if delete is None else discarding_stdin(delete)


class NodeCommand(command.remote.Command):
    """A bash script run on a node over ssh (on stdin), replaced (re-run) when the script or `triggers` change.

    `delete`, if given, runs when the step is replaced or destroyed (with the connection of the last `up`): a
    short command line. `delete_phase` instead runs the script itself again, with $SPARK_LLM_PHASE set to it.
    `secret`: the script carries a secret (it is encrypted in state, and so is its digest).
    `update`: what a changed connection runs (a short read-only command; the script is on its stdin but need
    not be read). pulumi-command keeps the update's stdout as the resource's `stdout`: a step whose stdout
    matters (a digest) reprints it here.
    """

    def __init__(
        self,
        name: str,
        *,
        connection: command.remote.ConnectionArgs,
        script: pulumi.Input[str],
        delete: str | None = None,
        delete_phase: str | None = None,
        triggers: Sequence[pulumi.Input[object]] = (),
        secret: bool = False,
        update: str = CONNECTION_UPDATED,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        stdin = pulumi.Output.from_input(script).apply(bash_stdin)
        digest = secret_digest(script) if secret else _digest(script)
        if secret:
            stdin = pulumi.Output.secret(stdin)
        super().__init__(
            name,
            connection=connection,
            create=run_stdin_script(),
            update=discarding_stdin(update),
            delete=_delete_command(delete, delete_phase),
            stdin=stdin,
            triggers=[digest, *triggers],
            # Progress lines (stdout) stream into `pulumi up` as the step runs; a failure's details go to stderr and
            # show once, in the step's error (which carries both streams).
            logging=command.remote.Logging.STDOUT,
            # No $PULUMI_COMMAND_STDOUT in the next run's environment: sshd would refuse it (AcceptEnv).
            add_previous_output_in_env=False,
            opts=opts,
        )


class OperatorCommand(command.local.Command):
    """A bash script run on the operator's machine (on stdin), replaced (re-run) when the script or `triggers`
    change; it reaches a node itself (plain OpenSSH, components.connection.ssh_command).

    `environment` holds what may change without re-running anything (the ssh command: a new key path or port):
    a change there is an update that only says so, as for NodeCommand.
    """

    def __init__(
        self,
        name: str,
        *,
        script: pulumi.Input[str],
        environment: pulumi.Input[dict[str, pulumi.Input[str]]] | None = None,
        triggers: Sequence[pulumi.Input[object]] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(
            name,
            create=run_stdin_script(),
            update=discarding_stdin(CONNECTION_UPDATED),
            stdin=pulumi.Output.from_input(script).apply(bash_stdin),
            interpreter=["/bin/bash", "-c"],
            environment=environment,
            triggers=[_digest(script), *triggers],
            add_previous_output_in_env=False,
            opts=opts,
        )
