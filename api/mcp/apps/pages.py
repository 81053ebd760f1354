"""The ``ui://`` pages and the tools whose results they show.

Each page is one self-contained HTML document (MCP Apps, "UI Resource
Format"): its stylesheet and scripts are inlined when it is first read, from
the files in ``pages/`` (package data), so a page loads nothing from any
origin, and its own Content-Security-Policy says so. The shared parts are
written once: ``shell.html`` (the document around every page, with that
policy), ``base.css``, ``bridge.js`` (our side of the postMessage protocol)
and ``ui.js``. A page brings only its own ``<main>`` (``NAME.html``), its
script (``NAME.js``) and, if it needs one, its own styles (``NAME.css``).
"""

from __future__ import annotations

import functools
import html
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
    #: The page's files in ``pages/``: ``STEM.html`` (its ``<main>``), ``STEM.js``, ``STEM.css``.
    stem: str

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
        "cards",
    ),
    Page(
        CLEANUP_URI,
        "cleanup",
        "Conflicts and near duplicates",
        "find_conflicts and find_near_duplicates groups side by side: keep one, merge, dismiss.",
        "cleanup",
    ),
    Page(
        OVERVIEW_URI,
        "overview",
        "What OwnSona knows",
        "memory_stats as an overview: counts, top tags, latest memories.",
        "overview",
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
    own_style = folder.joinpath(f"{page.stem}.css")
    # Placeholders replaced one by one (not str.format: CSS is full of braces).
    document = folder.joinpath("shell.html").read_text(encoding="utf-8")
    for placeholder, value in (
        ("{title}", html.escape(page.title)),
        ("{style}", own_style.read_text(encoding="utf-8") if own_style.is_file() else ""),
        ("{main}", folder.joinpath(f"{page.stem}.html").read_text(encoding="utf-8")),
        ("{script}", f"{page.stem}.js"),
    ):
        document = document.replace(placeholder, value, 1)

    def include(found: re.Match[str]) -> str:
        text = folder.joinpath(found[1]).read_text(encoding="utf-8")
        # Inlined into <script>/<style>: a closing tag inside would end it early.
        if "</" in text:
            raise ValueError(f"pages/{found[1]} must not contain '</'")
        return text

    return _INCLUDE.sub(include, document)
