"""The Pulumi CLI as the operator tools use it: the stack's config, its state, and `up`/`preview`.

The config comes from `pulumi config --json --show-secrets` and goes through the same parse and plan as the
Pulumi program (__main__.py), so the CLI and the program can never disagree about a key.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from spark_llm.config import NAMESPACE, parse, raw_from_pulumi
from spark_llm.ops.left_behind import end_left_behind, process_tree, release_locks_of, session_members
from spark_llm.plan.deployment import LAUNCH_TEMPLATE, DeploymentPlan
from spark_llm.plan.scripts import PROJECT_DIR
from spark_llm.plan.stack import StackPlan, build_stack

TRACEBACK = "Traceback (most recent call last):"
HELD_LINES = 200


def _interrupt(proc: subprocess.Popen) -> list[int]:
    """SIGINT to a pulumi command; returns the processes under it just before (see `_ended`)."""
    below = process_tree(proc.pid)
    proc.send_signal(signal.SIGINT)
    return below


def _ended(proc: subprocess.Popen, below: list[int]) -> None:
    """After an interrupted pulumi command ended: when a signal ended it (a SIGINT before it set its handler, or our
    SIGKILL), it could not end its plugins nor release the stack's lock, so what still runs of `below` is ended and
    the lock it took is released here (spark_llm.ops.left_behind).
    Whatever ended it, what still runs in its session is left behind too: a plugin started after `below` was taken
    (a fresh-clone run found a language host 30 s after a Ctrl-C in `spark-llm restart`, its pulumi ended cleanly)."""
    if proc.returncode is not None and proc.returncode < 0:
        end_left_behind(below)
        for lock in release_locks_of(proc.pid, dict(os.environ)):
            sys.stderr.write(
                f"spark-llm: pulumi ended before it could release the stack's lock: removed the lock it took ({lock})\n"
            )
    end_left_behind(session_members(proc.pid))


def _end(proc: subprocess.Popen, grace: float = 30) -> None:
    """Stop a pulumi command as Ctrl-C does (it ends its plugins itself), then wait for it: SIGKILL only after
    `grace` seconds. Further Ctrl-Cs meanwhile do not cut the wait short."""
    below = _interrupt(proc)
    deadline = time.monotonic() + grace
    while True:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            break
        except KeyboardInterrupt:
            continue
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            break
    _ended(proc, below)


def _interrupt_note(pid: int, again: bool) -> str:
    if again:
        return (
            f"spark-llm: still waiting for `pulumi` (pid {pid}) to end cleanly; `kill -9 {pid}` would leave the"
            " stack locked (then `pulumi cancel`)\n"
        )
    return f"spark-llm: Ctrl-C passed on to `pulumi` (pid {pid}); waiting for it to end cleanly and free the stack\n"


class _HeldCtrlC:
    """Ctrl-C while a pulumi command is being started is held until the caller can pass it on. Raised inside
    `subprocess.Popen`, after the child exists, it would leave that pulumi running with no reader (then killed by
    SIGPIPE, holding the stack's lock): a unit run found `spark-llm`'s own Ctrl-C test losing every line so. Only in
    the main thread, with a Python handler to put back (the CLI's own, spark_llm.ops.cli.main)."""

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):
                self._previous = previous
                signal.signal(signal.SIGINT, self._hold)

    def _hold(self, signum: int, frame: object) -> None:
        self.pressed = True

    def release(self) -> None:
        """Ctrl-C is Ctrl-C again; one pressed meanwhile is raised now, as KeyboardInterrupt."""
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if self.pressed:
            self.pressed = False
            raise KeyboardInterrupt


class PulumiError(RuntimeError):
    """A pulumi command failed; the message names the command and carries its error output."""


def config_from_json(doc: dict[str, Any]) -> tuple[dict[str, str], set[str]]:
    """`pulumi config --json` -> ({"spark-llm:key": text}, {secret keys without the namespace})."""
    values = {key: entry.get("value", "") for key, entry in doc.items() if isinstance(entry, dict)}
    prefix = NAMESPACE + ":"
    secrets = {k[len(prefix) :] for k, entry in doc.items() if k.startswith(prefix) and entry.get("secret")}
    return values, secrets


@dataclass(frozen=True)
class PulumiCli:
    """The pulumi CLI for one stack (None: the selected one), optionally with another stack config file."""

    stack: str | None = None
    config_file: str | None = None
    # Where Pulumi.yaml is: the checkout this package runs from (the plan reads scripts/ from there too).
    cwd: Path = PROJECT_DIR

    def stack_args(self) -> str:
        """The stack and config-file flags as a command printed for the operator carries them (" --stack NAME ...")."""
        words = [
            *(["--stack", self.stack] if self.stack else []),
            *(["--config-file", self.config_file] if self.config_file else []),
        ]
        return "".join(f" {shlex.quote(w)}" for w in words)

    def argv(self, *args: str, config: bool = False) -> list[str]:
        """`config`: the command reads the stack's config, so it gets `--config-file` too."""
        cmd = ["pulumi", *args, "--non-interactive"]
        if self.stack:
            cmd += ["--stack", self.stack]
        if config and self.config_file:
            cmd += ["--config-file", self.config_file]
        return cmd

    def _start(self, cmd: list[str], stderr: int) -> tuple[subprocess.Popen, _HeldCtrlC]:
        """The command in a session of its own: the terminal's Ctrl-C reaches it only as this process passes it on.
        A Ctrl-C while it starts is held (`_HeldCtrlC`): the caller releases it where it can pass it on."""
        held = _HeldCtrlC()
        try:
            return subprocess.Popen(
                cmd,
                cwd=self.cwd,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            ), held
        except FileNotFoundError:
            held.release()
            raise PulumiError("the pulumi CLI is not on PATH: run `. tools/env.sh` (after `make tools`)") from None
        except BaseException:
            held.release()
            raise

    def capture(self, *args: str, config: bool = False, timeout: float = 300) -> str:
        """Its stdout; raises PulumiError when it fails. Ctrl-C meanwhile is passed on to it and waited out, as in
        `stream`: killed outright, a pulumi command leaves its language host running (a fresh-clone run found one
        after `spark-llm rollback` was interrupted while it read the stack's config)."""
        cmd = self.argv(*args, config=config)
        proc, held = self._start(cmd, stderr=subprocess.PIPE)
        try:
            held.release()
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end(proc)
            raise PulumiError(f"`{' '.join(cmd)}` gave no answer within {timeout:.0f} s") from None
        except KeyboardInterrupt:
            _end(proc)
            raise
        if proc.returncode != 0:
            raise PulumiError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{stderr.strip()[-2000:]}")
        return stdout

    def stream(self, *args: str, config: bool = False, out: TextIO | None = None) -> tuple[int, str]:
        """Run with its output copied to `out` (default: this process's stdout at the time of the call) as it comes;
        returns (exit code, the whole output).

        Ctrl-C is passed on once and waited out: Pulumi cancels cleanly on its first SIGINT (it lets the operations
        in flight finish, writes its state, ends its plugins and releases the stack's lock), and this process keeps
        reading its output until it ends, then raises KeyboardInterrupt. Pulumi runs in a session of its own so the
        terminal's Ctrl-C reaches it only this way: a second SIGINT would make it terminate at once, and a reader
        that left early would kill it with SIGPIPE on its next line, holding the lock (issue 31, 3).
        """
        out = out or sys.stdout
        proc, starting = self._start(self.argv(*args, config=config), stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        lines: list[str] = []
        interrupted = False
        below: list[int] = []
        held: list[str] = []
        while True:
            try:
                starting.release()  # a Ctrl-C while it started is passed on as any other (below)
                for line in proc.stdout:
                    lines.append(line)
                    if interrupted and (held or TRACEBACK in line):
                        # Cancelled, Pulumi stops the program with SIGINT; one caught before it set its handler
                        # (__main__.py) prints a KeyboardInterrupt traceback of its own: held, and dropped when it
                        # ends so, since it says nothing the user needs (any other is shown as it was).
                        held.append(line)
                        if line.rstrip().endswith("KeyboardInterrupt") or len(held) > HELD_LINES:
                            if not line.rstrip().endswith("KeyboardInterrupt"):
                                out.writelines(held)
                            held = []
                        continue
                    out.write(line)
                    out.flush()
                out.writelines(held)
                code = proc.wait()
                break
            except KeyboardInterrupt:
                out.write(_interrupt_note(proc.pid, again=interrupted))
                out.flush()
                if not interrupted:
                    below = _interrupt(proc)
                interrupted = True
        if interrupted:
            _ended(proc, below)
            raise KeyboardInterrupt
        return code, "".join(lines)

    def config_values(self) -> tuple[dict[str, str], set[str]]:
        return config_from_json(json.loads(self.capture("config", "--json", "--show-secrets", config=True)))

    def load_stack(self) -> StackPlan:
        """The stack's config, parsed and planned by the Pulumi program's own builder (spark_llm.plan.stack); raises
        ConfigError when invalid."""
        values, secrets = self.config_values()
        return build_stack(parse(raw_from_pulumi(values), secrets), LAUNCH_TEMPLATE.read_text())

    def load_plans(self) -> dict[str, DeploymentPlan]:
        """Each model's group by its name (the API's `model`), in the stack file's order; one for a stack of one."""
        return self.load_stack().models

    def load_plan(self, model: str | None = None) -> DeploymentPlan:
        """The plan of the model named (None: the stack's one model); raises ModelChoiceError (spark_llm.plan.stack)."""
        return self.load_stack().choose(model)

    def export(self) -> dict[str, Any]:
        """The stack's state (`pulumi stack export`): resources with their URNs, inputs and outputs."""
        return json.loads(self.capture("stack", "export"))
