"""Output for people (rich tables, a progress display on a terminal) and for scripts (`--json`)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

PASS, FAIL, WARN, SKIP, SIMULATED = "pass", "fail", "warn", "skip", "simulated"
STATUS_STYLE = {PASS: "green", FAIL: "bold red", WARN: "yellow", SKIP: "dim", SIMULATED: "cyan"}
# Width of tables written to a file or pipe (a terminal uses its own).
PIPE_WIDTH = 160


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def console() -> Console:
    """The console for tables: the terminal's width, or PIPE_WIDTH and no colours into a pipe."""
    if stdout_is_terminal():
        return Console(highlight=False)
    return Console(width=PIPE_WIDTH, highlight=False, no_color=True, soft_wrap=False)


def styled_status(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def table(
    title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, status_column: str = ""
) -> Table:
    """A table with `columns`; the cells of `status_column` are coloured by their status word."""
    out = Table(title=title, title_justify="left", show_lines=False, header_style="bold")
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        cells: list[RenderableType] = []
        for column, value in zip(columns, row, strict=True):
            text = "" if value is None else str(value)
            cells.append(styled_status(text) if column == status_column else Text(text))
        out.add_row(*cells)
    return out


def render_text(renderable: RenderableType, width: int = PIPE_WIDTH) -> str:
    """Plain text of a renderable, as written into a pipe (for tests and logs)."""
    buffer = io.StringIO()
    Console(file=buffer, width=width, no_color=True, highlight=False, soft_wrap=False).print(renderable)
    return buffer.getvalue()


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


@contextlib.contextmanager
def progress(text: str, *, enabled: bool) -> Iterator[Callable[[str], None]]:
    """A spinner with a status line on stderr while a long check runs, when `enabled` and stdout is a
    terminal (tables and JSON on stdout stay clean); yields a function that changes the line."""
    if not (enabled and stdout_is_terminal()):
        yield lambda _text: None
        return
    status_console = Console(stderr=True)
    with status_console.status(text) as status:
        yield lambda new: status.update(new)


def gb(size: float | None) -> str:
    """Bytes as GB with one decimal (1 GB = 1e9 bytes, as disks are sold and `df -H` prints)."""
    return "?" if size is None else f"{size / 1e9:.1f} GB"


def seconds(value: float) -> str:
    """A duration for people: 3d4h, 2h5m, 4m12s, 9.3s."""
    if value < 60:
        return f"{value:.1f}s"
    total = int(value)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    return f"{minutes}m{secs}s"
