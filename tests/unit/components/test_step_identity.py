"""A step's script text is its identity (docs/developing.md): what a change to each template, header and shipped
program replaces on a deployed stack, named here, so that a tidy-up never restarts deployed engines unseen.

Each case edits one source the steps are made of (a comment added: the smallest change there is) and runs the
program under mocks with and without the edit; every resource whose inputs differ is one the next `pulumi up` of a
deployed stack replaces or updates. A change that touches a step not named here fails, and so does a step named
here that it no longer touches. When a change is meant to touch more, name the steps here and say in its commit
what the next `up` of a deployed stack does.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.graph_mocks import ROOT, dual_spark_stack_file, inputs, pinned, register

Edit = Callable[[pytest.MonkeyPatch], None]
LIB = sorted((ROOT / "scripts" / "lib").glob("*.sh"))


def stack() -> dict:
    """Pulumi.dual-spark.yaml with every optional part on, so that all its kinds of step are there."""
    raw = pinned(dual_spark_stack_file())
    raw["apiKey"] = "sk-step-identity"
    raw["router"] = {"image": "ghcr.io/you/spark-llm-router@sha256:" + "d" * 64}
    raw["network"] = dict(raw["network"], firewall="fabric-only")
    raw["memory"] = {"dropCaches": True}
    return raw


def resources(monkeypatch: pytest.MonkeyPatch, edit: Edit | None) -> dict[str, str]:
    """Every resource's inputs (as JSON) when the program runs with `edit` in place.

    The program's modules are imported afresh for the run (and put back after it): some steps' text is read at
    import (a module's constant), and the edit must reach that too.
    """
    for name in [n for n in sys.modules if n.split(".")[0] in ("spark_llm", "components")]:
        monkeypatch.delitem(sys.modules, name)
    # Nothing looks at the nodes (graph_mocks.register does the same to the modules it imported).
    bootstrap = importlib.import_module("components.bootstrap")
    monkeypatch.setattr(bootstrap, "observe_nodes", lambda stack, extras: [None for _ in extras])
    if edit is not None:
        edit(monkeypatch)
    registered = register(monkeypatch, stack(), secrets=("apiKey",))
    # The stack itself is registered once per process: not a step. Each run has a HOME of its own (the operator's
    # key file's path is in the connections): one name for all.
    return {
        name: re.sub(r"/tmp/spark-llm-graph-[^/\"]+", "$HOME", json.dumps(inputs(r), sort_keys=True))
        for name, r in registered.items()
        if r.type != "pulumi:pulumi:Stack"
    }


def run(edit: Edit | None) -> dict[str, str]:
    """`resources` in a context of its own: afterwards the modules other tests imported are the ones in use again,
    and none imported only for the run stays (its classes would not be theirs)."""
    imported = set(sys.modules)
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            return resources(monkeypatch, edit)
    finally:
        for name in set(sys.modules) - imported:
            if name.split(".")[0] in ("spark_llm", "components"):
                del sys.modules[name]


UNEDITED: dict[str, str] = {}
"""The run without an edit, once a process (the cases compare with it)."""


def touched(edit: Edit | None) -> list[str]:
    """The resources whose inputs `edit` changes."""
    if not UNEDITED:
        UNEDITED.update(run(None))
    before, after = UNEDITED, run(edit)
    assert set(after) == set(before)
    return sorted(name for name in after if after[name] != before[name])


def edit_files(paths: list[Path], edit: Callable[[str], str]) -> Edit:
    """Every read of `paths` (Path.read_text, as the plan reads scripts/) sees them edited."""
    chosen = {p.resolve() for p in paths}
    read_text = Path.read_text

    def edited(self: Path, *args, **kwargs) -> str:
        text = read_text(self, *args, **kwargs)
        return edit(text) if self.resolve() in chosen else text

    return lambda monkeypatch: monkeypatch.setattr(Path, "read_text", edited)


def comment_at_end(text: str) -> str:
    return text.rstrip("\n") + "\n# tidied\n"


def comment_in_header(text: str) -> str:
    shebang, _, rest = text.partition("\n")
    return f"{shebang}\n# tidied\n{rest}" if shebang.startswith("#!") else f"# tidied\n{text}"


def image_header(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = importlib.import_module("spark_llm.plan.image.steps")
    header = steps._header
    monkeypatch.setattr(steps, "_header", lambda *args: header(*args) + "# tidied\n")


SOURCES: dict[str, Edit] = {
    "scripts/launch.tmpl.sh": edit_files([ROOT / "scripts" / "launch.tmpl.sh"], comment_at_end),
    "the image steps' header (spark_llm.plan.image.steps._header)": image_header,
    "scripts/manifest*.py": edit_files(sorted((ROOT / "scripts").glob("manifest*.py")), comment_at_end),
    "scripts/fanout*.py": edit_files(sorted((ROOT / "scripts").glob("fanout*.py")), comment_at_end),
    # The supervisor's program and the group's room shipped beside it (spark_llm.plan.supervisor.program_files).
    "scripts/supervisor*.py, spark_llm/group/*.py": edit_files(
        [*sorted((ROOT / "scripts").glob("supervisor*.py")), *sorted((ROOT / "spark_llm" / "group").glob("*.py"))],
        comment_at_end,
    ),
    "scripts/supervisor_allow.sh": edit_files([ROOT / "scripts" / "supervisor_allow.sh"], comment_at_end),
    # A library's header (up to its first empty line) is for the reader: spark_llm.plan.scripts.bash_lib leaves it
    # out, except from a file a step ships as it is.
    "scripts/lib/*.sh headers": edit_files(LIB, comment_in_header),
    **{f"scripts/lib/{p.name}": edit_files([p], comment_at_end) for p in LIB},
}
EXPECTED: dict[str, list[str]] = {
    # The whole group restarts in order (its containers' spark-llm.script), and a new supervisor follows it.
    "scripts/launch.tmpl.sh": [
        "spark-engine-admit-spark-1",
        "spark-engine-admit-spark-2",
        "spark-engine-ready",
        "spark-engine-spark-1",
        "spark-engine-spark-1-drop-caches",
        "spark-engine-spark-2",
        "spark-engine-spark-2-drop-caches",
        "spark-engine-stop-spark-1",
        "spark-engine-stop-spark-2",
        "spark-engine-stop-supervisor",
        "spark-scripts-spark-1-script",
        "spark-scripts-spark-2-script",
        "spark-supervisor",
        "spark-supervisor-clear",
        "spark-supervisor-files",
    ],
    # Every image step runs again; the engine containers' image ID waits on the new verify steps: count it as a
    # restart of the group.
    "the image steps' header (spark_llm.plan.image.steps._header)": [
        "spark-image-spark-1",
        "spark-image-spark-1-verify",
        "spark-image-spark-2",
        "spark-image-spark-2-verify",
    ],
    # The head's weights step and the copy to the workers run again (a re-hash, stat-cached); the group restarts on
    # the digest the head's step prints, which preview cannot know before it runs.
    "scripts/manifest*.py": [
        "spark-weights-spark-1",
        "spark-weights-workers",
    ],
    # The copy to the workers runs again: nothing moves where every file matches, no restart.
    "scripts/fanout*.py": [
        "spark-weights-workers",
    ],
    # A new supervisor (its files and container); the engines run on.
    "scripts/supervisor*.py, spark_llm/group/*.py": [
        "spark-supervisor",
        "spark-supervisor-clear",
        "spark-supervisor-files",
    ],
    "scripts/supervisor_allow.sh": [
        "spark-supervisor-authorize-spark-2",
    ],
    "scripts/lib/*.sh headers": [
        "spark-supervisor-authorize-spark-2",
    ],
    "scripts/lib/bandwidth.sh": [],
    "scripts/lib/discover.sh": [],
    "scripts/lib/drop_caches.sh": [
        "spark-engine-spark-1-drop-caches",
        "spark-engine-spark-2-drop-caches",
    ],
    "scripts/lib/engine_ports.sh": [
        "spark-engine-take-ports-spark-1",
        "spark-engine-take-ports-spark-2",
    ],
    "scripts/lib/engine_state.sh": [],
    "scripts/lib/gpu_readings.sh": [],  # (spark-llm:monitoring's GPU writers: this stack has no monitoring)
    "scripts/lib/gpu_clock.sh": [],  # (spark-llm:nodes[].smClockCapMhz: this stack caps no node)
    "scripts/lib/firewall.sh": [
        "spark-firewall-spark-1",
        "spark-firewall-spark-2",
    ],
    "scripts/lib/host_record.sh": [
        "spark-engine-ready",
        # Installed on each worker beside the allow script: the supervisor's fabric request runs it.
        "spark-supervisor-authorize-spark-2",
    ],
    "scripts/lib/image.sh": [
        "spark-image-spark-1",
        "spark-image-spark-1-verify",
        "spark-image-spark-2",
        "spark-image-spark-2-verify",
    ],
    "scripts/lib/image_layers.sh": [
        "spark-image-spark-2",
    ],
    "scripts/lib/image_transfer.sh": [
        "spark-image-spark-2",
    ],
    "scripts/lib/memory.sh": [
        "spark-supervisor-authorize-spark-2",
    ],
    "scripts/lib/supervisor_image.sh": [
        "spark-supervisor-image-check",
    ],
    "scripts/lib/supervisor_key.sh": [
        "spark-supervisor-authorize-spark-2",
        "spark-supervisor-key",
    ],
    "scripts/lib/weights.sh": [
        "spark-weights-spark-1",
    ],
    "scripts/lib/weights_download.sh": [],
}


def test_the_same_sources_give_the_same_steps():
    assert touched(None) == []


@pytest.mark.parametrize("source", list(SOURCES))
def test_an_edit_of_a_source_touches_the_steps_named_and_no_other(source):
    assert touched(SOURCES[source]) == EXPECTED[source]
