"""The ``ui://`` pages and the tools whose results they show.

Each page is one self-contained HTML document (MCP Apps, "UI Resource
Format"): its stylesheet and scripts are inlined when it is first read, from
the files in ``pages/`` (package data), so a page loads nothing from any
origin, and its own Content-Security-Policy says so. The shared parts
(``base.css``, ``bridge.js``: our side of the postMessage protocol) are
written once and inlined into every page.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

from api.mcp.apps.extension import APP_MIME_TYPE

CARDS_URI = "ui://ownsona/cards"
CLEANUP_URI = "ui://ownsona/cleanup"
OVERVIEW_URI = "ui://ownsona/overview"


@dataclass(frozen=True)
class Page:
    """One UI resource: its listing and the file it is built from."""

    uri: str
    name: str
    title: str
    description: str
    #: The page's HTML file in ``pages/``.
    file: str

    def listing(self) -> dict[str, Any]:
        """The ``Resource`` object of ``resources/list``."""
        return {
            "uri": self.uri,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": APP_MIME_TYPE,
        }


PAGES: tuple[Page, ...] = (
    Page(
        CARDS_URI,
        "memory-cards",
        "Memory cards",
        "recall and search_memory results as cards: confirm, edit, forget (with undo), "
        "'this helped'.",
        "cards.html",
    ),
    Page(
        CLEANUP_URI,
        "cleanup",
        "Conflicts and near duplicates",
        "find_conflicts and find_near_duplicates groups side by side: keep one, merge, dismiss.",
        "cleanup.html",
    ),
    Page(
        OVERVIEW_URI,
        "overview",
        "What OwnSona knows",
        "memory_stats as an overview: counts, top tags, latest memories.",
        "overview.html",
    ),
)
PAGES_BY_URI = MappingProxyType({page.uri: page for page in PAGES})

#: Tool -> the page a host renders its result with (``_meta.ui.resourceUri``).
TOOL_PAGES = MappingProxyType(
    {
        "recall": CARDS_URI,
        "search_memory": CARDS_URI,
        "find_conflicts": CLEANUP_URI,
        "find_near_duplicates": CLEANUP_URI,
        "memory_stats": OVERVIEW_URI,
    }
)

# ``/*ownsona:NAME*/`` in a page: replaced by the file NAME of pages/ (CSS or JS).
_INCLUDE = re.compile(r"/\*ownsona:([a-z]+\.(?:css|js))\*/")


@functools.cache
def page_html(uri: str) -> str | None:
    """The whole HTML document of the page at ``uri``, or None for no such page."""
    page = PAGES_BY_URI.get(uri)
    if page is None:
        return None
    folder = resources.files(__package__).joinpath("pages")
    template = folder.joinpath(page.file).read_text(encoding="utf-8")

    def include(found: re.Match[str]) -> str:
        text = folder.joinpath(found[1]).read_text(encoding="utf-8")
        # Inlined into <script>/<style>: a closing tag inside would end it early.
        if "</" in text:
            raise ValueError(f"pages/{found[1]} must not contain '</'")
        return text

    return _INCLUDE.sub(include, template)
