"""spark_llm.commands: the command lines pulumi-command runs with a step's script on stdin, run for real in bash."""

from __future__ import annotations

import subprocess

import pytest

from spark_llm.commands import CONNECTION_UPDATED, _delete_command, bash_stdin, discarding_stdin, run_stdin_script

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
