"""`PulumiCli.stream` and Ctrl-C (issue 31, 3): the SIGINT reaches pulumi once, and the command waits for it to end.

A program named `pulumi` on PATH stands in for the CLI here (the real one, interrupted mid-rollback, is in
tests/integration/test_rollback.py): it counts the SIGINTs it gets, and on the first one says so and exits after a
moment, as Pulumi does when it cancels cleanly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_llm.ops.left_behind import end_left_behind, locks_left_by, running
from spark_llm.ops.pulumi_cli import PulumiCli

FAKE = """#!{python}
import os, signal, sys, time
got = []
def on_int(signum, frame):
    got.append(signum)
    print(f"cancelling (sigint {{len(got)}})", flush=True)
signal.signal(signal.SIGINT, on_int)
print(f"started sid={{os.getsid(0)}}", flush=True)
open({ready!r}, "w").close()
deadline = time.monotonic() + 30  # never left behind, even when the test fails
while not got and time.monotonic() < deadline:
    time.sleep(0.05)
# A test pressing Ctrl-C several times: every press lands while this runs (one after `stream` returned would reach
# the test itself, as a KeyboardInterrupt outside what it expects: a loaded machine's test worker died so).
while os.path.exists({ready!r} + ".pressing") and not os.path.exists({ready!r} + ".pressed"):
    if time.monotonic() > deadline:
        break
    time.sleep(0.02)
time.sleep(0.5)  # the operations in flight end
# The program, stopped with SIGINT before it set its handler: Python's traceback, which Pulumi relays.
print("    pulumi:pulumi:Stack spark-llm-sim  Traceback (most recent call last):", flush=True)
print('    pulumi:pulumi:Stack spark-llm-sim    File "exec", line 232, in <module>', flush=True)
print("    pulumi:pulumi:Stack spark-llm-sim  KeyboardInterrupt", flush=True)
print(f"done after {{len(got)}} sigint", flush=True)
open({ready!r} + ".done", "w").write(str(len(got)))
sys.exit(255)
"""


@pytest.fixture
def fake_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    ready = tmp_path / "ready"
    program = tmp_path / "bin" / "pulumi"
    program.parent.mkdir()
    program.write_text(FAKE.format(python=sys.executable, ready=str(ready)))
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ['PATH']}")
    # As `spark-llm` itself does at its start (spark_llm.ops.cli.main): Ctrl-C raises KeyboardInterrupt. After Pulumi
    # mocks ran in the same process (tests/unit/components), SIGINT is no longer caught at all (/proc/self/status:
    # SigCgt loses bit 2) though signal.getsignal still shows Python's handler, and a SIGINT ended the test worker.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield ready
    signal.signal(signal.SIGINT, previous)


def ctrl_c_when(ready: Path, times: int) -> threading.Thread:
    """As a terminal does: SIGINT to this process (not to pulumi, which runs in its own session), `times` times."""

    def press() -> None:
        deadline = time.monotonic() + 10
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        for _ in range(times):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
        Path(str(ready) + ".pressed").touch()  # the fake pulumi (FAKE) ends only now

    Path(str(ready) + ".pressing").touch()
    thread = threading.Thread(target=press, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("presses", [1, 3])
def test_ctrl_c_is_passed_on_once_and_pulumi_is_waited_for(fake_pulumi: Path, tmp_path: Path, presses: int):
    out_file = tmp_path / "out.txt"
    with out_file.open("w") as out:
        thread = ctrl_c_when(fake_pulumi, presses)
        with pytest.raises(KeyboardInterrupt):
            PulumiCli(cwd=tmp_path).stream("up", "--yes", out=out)
        thread.join()
    said = out_file.read_text()
    # Pulumi's own last line was read: it ended before the command did, after exactly one SIGINT.
    assert "done after 1 sigint" in said, said
    assert said.count("cancelling") == 1
    assert "Ctrl-C passed on to `pulumi`" in said and "waiting for it to end cleanly" in said
    assert said.count("still waiting for `pulumi`") == presses - 1
    assert f"sid={os.getsid(0)}" not in said  # a session of its own: the terminal's Ctrl-C does not reach it
    assert "Traceback" not in said and "KeyboardInterrupt" not in said  # the program's, interrupted: dropped


def test_ctrl_c_while_pulumi_is_being_started_is_passed_on_not_lost(fake_pulumi: Path, tmp_path: Path, monkeypatch):
    """A Ctrl-C inside `subprocess.Popen`, after pulumi exists (a full unit run found it so: every line lost, pulumi
    left with no reader): held until `stream` can pass it on, then passed on as any other."""
    real = subprocess.Popen

    def popen_then_ctrl_c(*args, **kwargs):
        proc = real(*args, **kwargs)
        if args[0][0] != "pulumi":
            return proc  # `ps`, reading the process tree before the Ctrl-C is passed on
        deadline = time.monotonic() + 10
        while not fake_pulumi.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)  # still inside the start, as the terminal's Ctrl-C can be
        time.sleep(0.1)  # the handler runs here, in the start
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen_then_ctrl_c)
    out_file = tmp_path / "out.txt"
    with out_file.open("w") as out, pytest.raises(KeyboardInterrupt):
        PulumiCli(cwd=tmp_path).stream("up", "--yes", out=out)
    said = out_file.read_text()
    assert "done after 1 sigint" in said and "Ctrl-C passed on to `pulumi`" in said, said


def test_without_ctrl_c_the_exit_code_and_output_come_back(fake_pulumi: Path, tmp_path: Path):
    (tmp_path / "bin" / "pulumi").write_text(f"#!{sys.executable}\nprint('fine')\nraise SystemExit(3)\n")
    out_file = tmp_path / "out.txt"
    with out_file.open("w") as out:
        code, output = PulumiCli(cwd=tmp_path).stream("preview", out=out)
    assert (code, output) == (3, "fine\n")
    assert out_file.read_text() == "fine\n"


def test_a_short_pulumi_command_interrupted_is_stopped_as_ctrl_c_stops_it_and_waited_for(fake_pulumi: Path, tmp_path):
    """`pulumi config`/`stack history` (PulumiCli.capture) interrupted: one SIGINT and a wait, not a SIGKILL that leaves
    its language host running (a fresh-clone run found one after an interrupted `spark-llm rollback`)."""
    thread = ctrl_c_when(fake_pulumi, 2)
    with pytest.raises(KeyboardInterrupt):
        PulumiCli(cwd=tmp_path).capture("config", "--json")
    thread.join()
    assert Path(str(fake_pulumi) + ".done").read_text() == "1"  # it ended on its own, after exactly one SIGINT


# Pulumi 3.274.1 starts its language host ~50 ms before it sets its SIGINT handler: a Ctrl-C then kills `pulumi`
# outright (exit -2) and its language host, in a process group of its own, runs on for its 5-minute health check (a
# fresh-clone run: "left running 30 s after Ctrl-C", in an interrupted `spark-llm rollback`; 12 of 50 SIGINTs
# 0.3-0.8 s into `spark-llm`'s own `pulumi up` of a one-line program, 0 of 50 since). This one does the same: a
# "plugin" in its own process group, and no handler.
DIES_ON_SIGINT = """#!{python}
import os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)  # before it says it is ready: the Ctrl-C must find no handler
# Pulumi reads a plugin's output through pipes of its own: the plugin does not hold pulumi's stdout.
plugin = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)"],
    process_group=0,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
open({ready!r} + ".tmp", "w").write(str(plugin.pid))
os.replace({ready!r} + ".tmp", {ready!r})  # whole, or not there
time.sleep(30)
"""


def test_what_pulumi_left_behind_is_ended_with_sigint_first_then_sigkill(tmp_path: Path):
    ready = tmp_path / "ready"
    ignores = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            f"open({str(ready)!r}, 'a').write('x'); time.sleep(60)",
        ]
    )
    polite = subprocess.Popen(
        [sys.executable, "-c", f"open({str(ready)!r}, 'a').write('x'); import time; time.sleep(60)"]
    )
    deadline = time.monotonic() + 10  # both have set up (Python's SIGINT handler, the SIG_IGN)
    while not (ready.exists() and len(ready.read_text()) == 2) and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    assert sorted(end_left_behind([ignores.pid, polite.pid, 999999], grace=1.0)) == sorted([ignores.pid, polite.pid])
    assert polite.wait(5) != -signal.SIGKILL and ignores.wait(5) == -signal.SIGKILL
    assert time.monotonic() - started >= 1.0
    assert end_left_behind([ignores.pid, polite.pid]) == []  # nothing left: nothing signalled, no wait


# A pulumi that cancels cleanly (its handler set, exit 255) yet leaves a "plugin" running, one it started after the
# CLI looked below it: what a fresh-clone run found after a Ctrl-C in `spark-llm restart` (a language host 30 s on).
LEAVES_A_LATE_PLUGIN = """#!{python}
import os, signal, subprocess, sys, time
got = []
signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
open({ready!r}, "w").close()
deadline = time.monotonic() + 30
while not got and time.monotonic() < deadline:
    time.sleep(0.02)
plugin = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)"],
    process_group=0,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
open({ready!r} + ".plugin", "w").write(str(plugin.pid))
sys.exit(255)
"""


@pytest.mark.parametrize("how", ["stream", "capture"])
@pytest.mark.parametrize(
    ("program", "plugin_file"),
    [(DIES_ON_SIGINT, ""), (LEAVES_A_LATE_PLUGIN, ".plugin")],
    ids=["killed-before-its-handler", "clean-cancel-late-plugin"],
)
def test_no_plugin_of_an_interrupted_pulumi_is_left_running(
    fake_pulumi: Path, tmp_path: Path, how: str, program: str, plugin_file: str
):
    (tmp_path / "bin" / "pulumi").write_text(program.format(python=sys.executable, ready=str(fake_pulumi)))
    thread = ctrl_c_when(fake_pulumi, 1)
    cli = PulumiCli(cwd=tmp_path)
    with pytest.raises(KeyboardInterrupt), open(tmp_path / "out.txt", "w") as out:
        cli.stream("up", "--yes", out=out) if how == "stream" else cli.capture("config", "--json")
    thread.join()
    plugin = int(Path(str(fake_pulumi) + plugin_file).read_text())
    assert not running(plugin), f"the plugin (pid {plugin}) was left running"


# A pulumi that takes the stack's lock (as the file backend writes it) and is ended by a SIGINT before it set its
# handler, as Pulumi 3.274.1 is between its DIY backend's Lock and the update's cancellation scope.
LOCKS_THEN_DIES = """#!{python}
import json, os, signal, socket, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
locks = os.path.join({backend!r}, ".pulumi", "locks", "organization", "spark-llm", "sim")
os.makedirs(locks, exist_ok=True)
lock = {{"pid": os.getpid(), "username": "u", "hostname": socket.gethostname(), "timestamp": "2026-12-07T00:00:00Z"}}
open(os.path.join(locks, "7d3c.json"), "w").write(json.dumps(lock))
open({ready!r}, "w").close()
time.sleep(30)
"""


def test_a_lock_left_by_a_pulumi_the_ctrl_c_ended_outright_is_released_and_no_other(
    fake_pulumi: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    backend = tmp_path / "state"
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{backend}?metadata=skip")
    program = LOCKS_THEN_DIES.format(python=sys.executable, ready=str(fake_pulumi), backend=str(backend))
    (tmp_path / "bin" / "pulumi").write_text(program)
    locks = backend / ".pulumi" / "locks" / "organization" / "spark-llm" / "sim"
    locks.mkdir(parents=True)
    # Another operator's `up` on this host (another pid), and one from another host: theirs, kept.
    for name, pid, host in (("other-pid.json", os.getpid(), socket.gethostname()), ("other-host.json", 1, "elsewhere")):
        (locks / name).write_text(json.dumps({"pid": pid, "hostname": host}))
    thread = ctrl_c_when(fake_pulumi, 1)
    with pytest.raises(KeyboardInterrupt), open(tmp_path / "out.txt", "w") as out:
        real_stderr, sys.stderr = sys.stderr, out
        try:
            PulumiCli(cwd=tmp_path).stream("up", "--yes", out=out)
        finally:
            sys.stderr = real_stderr
    thread.join()
    assert sorted(p.name for p in locks.iterdir()) == ["other-host.json", "other-pid.json"]
    said = (tmp_path / "out.txt").read_text()
    assert (
        f"pulumi ended before it could release the stack's lock: removed the lock it took ({locks / '7d3c.json'})"
        in said
    )


def test_no_lock_is_touched_on_a_backend_that_is_not_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("PULUMI_BACKEND_URL", "postgres://state@db/pulumi")
    assert locks_left_by(os.getpid(), dict(os.environ)) == []
    home = tmp_path / "pulumi-home"
    home.mkdir()
    (home / "credentials.json").write_text(json.dumps({"current": f"file://{tmp_path}"}))
    locks = tmp_path / ".pulumi" / "locks" / "organization" / "p" / "s"
    locks.mkdir(parents=True)
    (locks / "a.json").write_text(json.dumps({"pid": 4242, "hostname": socket.gethostname()}))
    # No PULUMI_BACKEND_URL: the backend `pulumi login` chose.
    environ = {"PULUMI_HOME": str(home)}
    assert locks_left_by(4242, environ) == [locks / "a.json"] and locks_left_by(4243, environ) == []
