"""The weights fan-out on a cut fabric: rsync gives up when nothing moves, and the copy says where and what to do."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def transport():
    """scripts/fanout_transport.py, as the head imports it (beside fanout.py, not a package of ours)."""
    spec = importlib.util.spec_from_file_location("fanout_transport", SCRIPTS / "fanout_transport.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fanout_transport", module)
    spec.loader.exec_module(module)
    return module


def test_every_rsync_gives_up_when_no_data_moves_for_a_minute():
    t = transport()
    job = t.Job(source=t.Node("head", "10.0.0.1", is_head=True), target=t.Node("w1", "10.0.0.2"), files=[], whole=False)
    assert "--timeout=60" in t.rsync_options(job) and t.IO_TIMEOUT_EXIT == 30


def test_a_copy_that_stopped_moving_names_the_worker_its_source_and_what_to_do():
    t = transport()
    job = t.Job(source=t.Node("w1", "10.0.0.2"), target=t.Node("w2", "10.0.0.3"), files=[], whole=False)
    message = str(t.link_cut(job, 40_000_000, 80_000_000))
    assert message.startswith("w2: no data moved from w1 for 60 s: the fabric between them is cut or w2 is down")
    assert "(40.0 MB of 80.0 MB had arrived)" in message
    assert "`spark-llm preflight`), then run pulumi up again: files already copied are kept" in message
