"""The README a first-time reader finishes (issue 33, item 5): short, with every docs/ page linked from it, and no
link in README.md or docs/ that leads nowhere: a relative path names a file of the checkout, a `#anchor` a heading
of the page it points at, spelled as GitHub spells a heading's anchor."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# The Markdown a reader opens from the README: itself, its docs/ pages, and the READMEs they send readers to.
CHECKED = [
    README,
    *PAGES,
    ROOT / "sim" / "README.md",
    ROOT / "sim" / "engine" / "README.md",
    ROOT / "tools" / "README.md",
]
MAX_README_LINES = 250

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"``.+?``|`[^`\n]+`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def _prose(text: str) -> str:
    """The text outside code blocks and code spans, where a link is a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without formatting, lower case, every character but a letter,
    digit, `_`, `-` or space dropped, spaces made hyphens (github/cmark-gfm's toc filter)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors as its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a page; a repeated heading's anchor takes -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        base = github_anchor(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(path: Path) -> list[str]:
    """Each relative link of a Markdown file whose file or anchor does not exist, with why."""
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not the checkout's
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: {dest.name} has no heading with the anchor #{anchor}")
    return broken


def test_the_readme_is_short_enough_to_finish():
    count = len(README.read_text().splitlines())
    assert count < MAX_README_LINES, f"README.md has {count} lines: move a topic to docs/"


def test_the_readme_links_every_docs_page():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in LINK.findall(_prose(README.read_text()))}
    assert PAGES, "docs/ has no page"
    assert [p.name for p in PAGES if p.resolve() not in linked] == []


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path):
    assert broken_links(path) == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Using it on real nodes", "using-it-on-real-nodes"),
        (
            "One cluster, one stack, a team: the state in PostgreSQL",
            "one-cluster-one-stack-a-team-the-state-in-postgresql",
        ),
        ("First run on real Sparks: `spark-llm init`", "first-run-on-real-sparks-spark-llm-init"),
        ("Deploying, from your workstation (no root)", "deploying-from-your-workstation-no-root"),
        ("The host as it last worked", "the-host-as-it-last-worked"),
    ],
)
def test_anchors_are_spelled_as_github_spells_them(heading, anchor):
    assert github_anchor(heading) == anchor


def test_a_link_to_a_missing_page_or_heading_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Other\n\n## A part\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[fine](other.md#a-part) [here](#page) [gone](gone.md) [moved](other.md#the-firewall)\n"
        "```\n[in a code block](nowhere.md)\n```\n`[in a span](nowhere.md)` [web](https://example.com/x.md)\n"
    )
    assert broken_links(page) == [
        "gone.md: no file gone.md",
        "other.md#the-firewall: other.md has no heading with the anchor #the-firewall",
    ]
