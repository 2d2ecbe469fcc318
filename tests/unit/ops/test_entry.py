"""`spark-llm`'s entry point: a Ctrl-C while the commands still import ends with one line, not a traceback."""

from __future__ import annotations

import builtins
import signal

from spark_llm.ops import entry


def test_ctrl_c_while_the_commands_import_ends_with_one_line_and_sigints_code(monkeypatch, capsys):
    real_import = builtins.__import__

    def interrupted(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 (__import__'s names)
        if name == "spark_llm.ops" and fromlist and "cli" in fromlist:
            raise KeyboardInterrupt
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", interrupted)
    before = signal.getsignal(signal.SIGINT)
    try:
        assert entry.main() == 130
    finally:
        signal.signal(signal.SIGINT, before)
    said = capsys.readouterr()
    assert said.err == "spark-llm: interrupted (before it started: nothing was done)\n" and said.out == ""


def test_the_installed_command_is_this_entry_point():
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["spark-llm"] == "spark_llm.ops.entry:main"
