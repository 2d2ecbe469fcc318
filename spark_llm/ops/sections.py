"""Pure: the operator commands' node scripts print their facts as sections, one `capture NAME cmd...` each (the
command's output and exit code), which `parse_sections` reads back. The program's probe (spark_llm.plan.observation)
prints `SECTION<TAB>VALUE` lines instead: its facts are one line each; these are whole outputs with an exit code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SECTION_FUNCTION = r"""capture() {
  local name=$1
  shift
  printf -- '--- spark-llm:%s ---\n' "$name"
  "$@" 2>&1
  printf -- '\n--- spark-llm:rc=%s ---\n' "$?"
}
"""

_SECTION = re.compile(r"^--- spark-llm:(\S+) ---$")


@dataclass(frozen=True)
class Section:
    """One `capture NAME cmd...` of a script: the command's exit code and its output."""

    rc: int
    body: str

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def first_line(self) -> str:
        return next((line for line in self.body.splitlines() if line.strip()), "")


def parse_sections(text: str) -> dict[str, Section]:
    """Pure: the sections a script made with `capture` printed (a section cut short is left out)."""
    sections: dict[str, Section] = {}
    name: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        match = _SECTION.match(line)
        if not match:
            if name is not None:
                body.append(line)
            continue
        tag = match.group(1)
        if tag.startswith("rc=") and name is not None:
            rc = int(tag[3:]) if tag[3:].lstrip("-").isdigit() else -1
            sections[name] = Section(rc, "\n".join(body).strip("\n"))
            name, body = None, []
        elif not tag.startswith("rc="):
            name, body = tag, []
    return sections
