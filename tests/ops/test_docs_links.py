"""The README and the pages in docs/ hold together (issue 35).

Every relative link in ``README.md`` and ``docs/*.md`` (images included) names a
file that exists, and every ``#anchor`` names a heading of that page, by GitHub's
rule for heading ids. The README stays short, points a contributor at the recipe
for a tool on its first screen, states the test command CI runs, and lists every
page in docs/. No services: these read files only.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

#: What a newcomer sees before scrolling, in lines of the README's source.
FIRST_SCREEN_LINES = 25
README_MAX_LINES = 300

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`+[^`]*`+")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Link:
    page: Path
    line: int
    target: str

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}: ({self.target})"


def prose_lines(page: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, numbered from 1."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def links(page: Path) -> list[Link]:
    found = []
    for number, line in prose_lines(page):
        for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
            found.append(Link(page, number, match.group(1)))
    return found


def slug(heading: str) -> str:
    """GitHub's id for a heading: its text, lowercased, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading id of a page; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: Counter[str] = Counter()
    ids = set()
    for _, line in prose_lines(page):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        ids.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
        seen[base] += 1
    return ids


def is_relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)


def relative_links() -> list[Link]:
    return [link for page in PAGES for link in links(page) if is_relative(link.target)]


def test_the_slug_rule_is_githubs() -> None:
    assert slug("Two machines of everything: `docker-compose.ha.yml`") == (
        "two-machines-of-everything-docker-composehayml"
    )
    assert slug("Redis Sentinel (a Redis that survives its master)") == (
        "redis-sentinel-a-redis-that-survives-its-master"
    )
    assert slug("Where each tool's behaviour lives") == "where-each-tools-behaviour-lives"
    assert slug("The `ownsona` command") == "the-ownsona-command"
    assert slug("A local client over standard input/output") == (
        "a-local-client-over-standard-inputoutput"
    )


def test_every_relative_link_names_a_file_and_a_heading_that_exist() -> None:
    broken = []
    for link in relative_links():
        path_part, _, anchor = link.target.partition("#")
        target = (link.page.parent / path_part).resolve() if path_part else link.page
        name = target.relative_to(ROOT).as_posix() if target.is_relative_to(ROOT) else ""
        if not target.exists():
            broken.append(f"{link.where()} no such file")
            continue
        if anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{link.where()} no heading with id {anchor!r} in {name}")
    assert not broken, "\n".join(broken)


def test_readme_is_short_and_shows_a_contributor_the_recipe_first() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    first_screen = [link.target for link in links(README) if link.line <= FIRST_SCREEN_LINES]
    assert "docs/adding-a-tool.md" in first_screen, first_screen


def test_readme_states_the_test_command_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^scripts/test\b", ci, re.MULTILINE), "CI no longer runs scripts/test"
    readme = README.read_text(encoding="utf-8")
    assert re.search(r"^scripts/test\s", readme, re.MULTILINE), "README lost `scripts/test`"


def test_readme_lists_every_page_in_docs() -> None:
    listed = {
        (ROOT / link.target.partition("#")[0]).resolve()
        for link in links(README)
        if is_relative(link.target)
    }
    unlisted = [
        page.relative_to(ROOT).as_posix() for page in PAGES[1:] if page.resolve() not in listed
    ]
    assert not unlisted, f"pages the README's Documentation table does not list: {unlisted}"
