"""components.commands: the command lines pulumi-command runs with a step's script on stdin, run for real in bash."""

from __future__ import annotations

import asyncio
import subprocess

import pulumi
import pytest

from components.commands import (
    CONNECTION_UPDATED,
    _delete_command,
    bash_stdin,
    discarding_stdin,
    run_stdin_script,
    secret_digest,
)
from spark_llm.plan.node_files import sha256_text

SCRIPT = 'echo "phase=${SPARK_LLM_PHASE:-create}"\nexit 0\necho never\n' + "# padding\n" * 20000


def run(command_line: str, stdin: str) -> subprocess.CompletedProcess[str]:
    # As pulumi-command runs it: the command line in a shell, the script on its stdin.
    return subprocess.run(["sh", "-c", command_line], input=stdin, capture_output=True, text=True, timeout=30)


def test_create_reads_the_whole_script_before_running_it():
    """An early `exit` in a long script still leaves stdin fully read (pulumi-command's ssh session fails with
    EOF when the remote command is gone before all of stdin was sent)."""
    out = run(
        run_stdin_script(),
        bash_stdin(SCRIPT),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["phase=create"]


@pytest.mark.parametrize(
    ("delete", "phase", "expected"),
    [
        ("rm -f /nonexistent/x", None, ""),
        (None, "delete", "phase=delete\n"),
    ],
)
def test_delete_drains_stdin_or_runs_the_script_in_its_phase(delete, phase, expected):
    command_line = _delete_command(delete, phase)
    assert command_line is not None
    out = run(command_line, bash_stdin(SCRIPT))
    assert out.returncode == 0 and out.stdout == expected


def test_no_delete_and_not_both():
    assert _delete_command(None, None) is None
    with pytest.raises(ValueError, match="not both"):
        _delete_command("rm -f x", "delete")


def test_update_only_says_so_and_drains_stdin():
    out = run(discarding_stdin(CONNECTION_UPDATED), bash_stdin(SCRIPT))
    assert out.returncode == 0 and out.stdout == "spark-llm: connection settings recorded (nothing to re-run)\n"


def test_a_failing_script_fails_the_command_with_its_exit_code():
    out = run(run_stdin_script(), bash_stdin("echo partial\nfalse\necho never\n"))
    assert out.returncode == 1 and out.stdout == "partial\n"


def test_a_failure_opens_with_a_short_line_that_says_what_ran():
    """pulumi-command prints `running "<command>"` before a failed step's lines: the wrapper was 75 characters of
    `f=$(mktemp) || exit 1; cat > \\"$f\\"; ...` that said nothing to a person."""
    for command_line in (run_stdin_script(), _delete_command(None, "delete")):
        assert command_line is not None
        assert command_line.startswith(": spark-llm step, its script on stdin; ")
        assert '"' not in command_line and "\n" not in command_line
        assert len(command_line) <= 120


def test_nothing_of_the_script_runs_when_its_temp_file_cannot_be_made():
    """No temp file (or, the same `&&`, a `cat` that fails on a full /tmp): no part of the script runs."""
    out = subprocess.run(
        ["sh", "-c", run_stdin_script()],
        input=bash_stdin("echo ran\n"),
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": "/nonexistent-dir"},
    )
    assert out.returncode != 0 and "ran" not in out.stdout


def test_a_secret_digest_is_secret_once_known_and_a_plain_unknown_before():
    """pulumi-command refused an unknown secret inside `triggers` ("malformed secret: missing value"): the first
    preview of a Ray deployment (whose token is made by the up) failed. Known, the digest stays a secret."""

    async def settle() -> list[tuple[object, bool, bool]]:
        loop = asyncio.get_running_loop()

        def done(result: object) -> asyncio.Future:
            future = loop.create_future()
            future.set_result(result)
            return future

        unknown_secret = pulumi.Output(set(), done(None), done(False), done(True))  # a preview's token
        digests = [secret_digest(pulumi.Output.secret("token")), secret_digest(unknown_secret)]
        return [(await d.future(with_unknowns=True), await d.is_known(), await d.is_secret()) for d in digests]

    # On the thread's own loop, left open: asyncio.run would close it and unset it for the mocked-program tests
    # that run after this one in the same process (the SDK reads asyncio.get_event_loop()).
    known, unknown = asyncio.get_event_loop_policy().get_event_loop().run_until_complete(settle())
    assert known == (sha256_text("token"), True, True)
    assert unknown[1:] == (False, False)
