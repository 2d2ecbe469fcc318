"""The weights fan-out on a cut fabric: rsync gives up when nothing moves, and the copy says where and what to do."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def head_module(name: str):
    """scripts/NAME.py, as the head imports it (beside fanout.py, not a package of ours)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def transport():
    """scripts/fanout_transport.py, with the schedule it imports beside it."""
    head_module("fanout_schedule")
    return head_module("fanout_transport")


def test_every_rsync_gives_up_when_no_data_moves_for_a_minute():
    t = transport()
    job = t.Job(source=t.Node("head", "10.0.0.1", is_head=True), target=t.Node("w1", "10.0.0.2"), files=[], whole=False)
    assert "--timeout=60" in t.rsync_options(job) and t.IO_TIMEOUT_EXIT == 30


def test_the_idle_bound_is_the_plans_and_the_message_says_it():
    """spark-llm:timeouts.fabricIdleSeconds reaches every rsync and the error names it."""
    t = transport()
    job = t.Job(t.Node("head", "10.0.0.1", is_head=True), t.Node("w1", "10.0.0.2"), [], False, idle_seconds=15)
    assert "--timeout=15" in t.rsync_options(job) and "--timeout=60" not in t.rsync_options(job)
    assert str(t.link_cut(job, 0, 1)).startswith("w1: no data moved from head for 15 s:")


def test_a_copy_that_stopped_moving_names_the_worker_its_source_and_what_to_do():
    t = transport()
    job = t.Job(source=t.Node("w1", "10.0.0.2"), target=t.Node("w2", "10.0.0.3"), files=[], whole=False)
    message = str(t.link_cut(job, 40_000_000, 80_000_000))
    assert message.startswith("w2: no data moved from w1 for 60 s: the fabric between them is cut or w2 is down")
    assert "(40.0 MB of 80.0 MB had arrived)" in message
    assert "`spark-llm preflight`), then run pulumi up again: files already copied are kept" in message


def test_a_cut_workers_sessions_are_ended_at_once_not_waited_on():
    """Over a cut fabric an ssh session to the worker cannot close (ssh waits out ServerAlive, a minute): the
    copy's cleanup kills its daemon's session and its hasher at once, so the error reaches the user then."""
    t = transport()
    receiver = object.__new__(t.Receiver)
    receiver.proc = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE)
    hasher = object.__new__(t.Hasher)
    hasher.proc = subprocess.Popen(["sleep", "60"], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    started = time.monotonic()
    receiver.stop(timeout=0)
    hasher.close(timeout=0)
    assert receiver.proc.wait(timeout=5) == -signal.SIGKILL and hasher.proc.wait(timeout=5) == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_a_link_cut_names_the_worker_it_cut_off():
    t = transport()
    job = t.Job(t.Node("head", "10.0.0.1", is_head=True), t.Node("w1", "10.0.0.2"), [], False)
    cut = t.link_cut(job, 0, 1)
    assert isinstance(cut, t.CopyError) and cut.node == "w1"


def test_every_weights_copy_takes_the_plans_one_rsync_option_list():
    # The head-local and operator -> head copies use RSYNC_OPTIONS in bash; the fan-out gets the same list in its
    # plan and adds only what its streams need. No other source spells an rsync option of the copy.
    from spark_llm.plan.weights.sync import RSYNC_OPTIONS

    t = transport()
    job = t.Job(t.Node("head", "10.0.0.1", is_head=True), t.Node("w1", "10.0.0.2"), [], False)
    job.base_options = RSYNC_OPTIONS
    opts = t.rsync_options(job)
    assert opts[: len(RSYNC_OPTIONS)] == list(RSYNC_OPTIONS)
    assert not set(opts[len(RSYNC_OPTIONS) :]) & set(RSYNC_OPTIONS)
    spelled = [p.name for p in SCRIPTS.rglob("*") if p.is_file() and "--partial-dir" in p.read_text(errors="replace")]
    assert spelled == [], spelled
