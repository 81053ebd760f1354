"""Server-side SVG charts for the console's stats page: pure functions, no script.

Each chart is an ``<svg role="img" aria-labelledby="...">`` with a ``<title>``
and a ``<desc>`` that reads out every figure, and carries the figures as
``<text>`` too; the page shows the same figures as a table. Colours come from
the stylesheet (classes, no ``style`` attribute: the console's CSP forbids
inline style), so they follow the light and dark schemes.

Every label is escaped here (a tag or an app name is the owner's data); the
result is :class:`markupsafe.Markup`, safe to put in a template as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH = 600
#: Longest label drawn in full beside a horizontal bar; longer ones end in an ellipsis.
MAX_LABEL_CHARS = 22


@dataclass(frozen=True)
class Bar:
    label: str
    value: int
    #: A shorter label under a column (every one drawn, or every ``label_every``-th).
    short: str | None = None


@dataclass(frozen=True)
class Part:
    label: str
    value: int
    #: A CSS class for its colour (``part-1`` ... in stats.css).
    css: str


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _desc(bars: Sequence[Bar] | Sequence[Part]) -> str:
    return "; ".join(f"{b.label}: {b.value}" for b in bars) if bars else "No data yet."


def _open(chart_id: str, title: str, desc: str, height: int, css: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{css}" role="img"'
        f' viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}"'
        f' aria-labelledby="{chart_id}-title {chart_id}-desc">',
        f'<title id="{chart_id}-title">{escape(title)}</title>',
        f'<desc id="{chart_id}-desc">{escape(desc)}</desc>',
    ]


def column_chart(chart_id: str, title: str, bars: Sequence[Bar], *, label_every: int = 1) -> Markup:
    """Vertical bars in order (weeks, days), each with its value above and label below."""
    height, top, bottom, left = 220, 24, 36, 8
    plot_h = height - top - bottom
    parts = _open(chart_id, title, _desc(bars), height, "chart-svg columns")
    peak = max((b.value for b in bars), default=0)
    slot = (WIDTH - 2 * left) / max(len(bars), 1)
    base = top + plot_h
    parts.append(f'<line class="axis" x1="{left}" y1="{base}" x2="{WIDTH - left}" y2="{base}"/>')
    for i, bar in enumerate(bars):
        h = 0.0 if peak == 0 else plot_h * bar.value / peak
        x = left + i * slot + slot * 0.15
        w = slot * 0.7
        cx = x + w / 2
        parts.append(
            f'<rect class="bar" x="{_fmt(x)}" y="{_fmt(base - h)}" width="{_fmt(w)}"'
            f' height="{_fmt(h)}"><title>{escape(bar.label)}: {bar.value}</title></rect>'
        )
        if bar.value:
            parts.append(
                f'<text class="value" x="{_fmt(cx)}" y="{_fmt(base - h - 6)}"'
                f' text-anchor="middle">{bar.value}</text>'
            )
        if i % label_every == 0:
            parts.append(
                f'<text class="label" x="{_fmt(cx)}" y="{height - 14}"'
                f' text-anchor="middle">{escape(bar.short or bar.label)}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def bar_chart(chart_id: str, title: str, bars: Sequence[Bar]) -> Markup:
    """Horizontal bars, largest first as given (top tags, apps), label left, value right."""
    row, top, label_w, right = 30, 8, 190, 48
    height = top * 2 + row * max(len(bars), 1)
    parts = _open(chart_id, title, _desc(bars), height, "chart-svg bars")
    peak = max((b.value for b in bars), default=0)
    plot_w = WIDTH - label_w - right
    for i, bar in enumerate(bars):
        y = top + i * row
        w = 0.0 if peak == 0 else plot_w * bar.value / peak
        label = bar.label if len(bar.label) <= MAX_LABEL_CHARS else bar.label[:21] + "…"
        parts.append(
            f'<text class="label" x="{label_w - 8}" y="{y + row / 2 + 5:.0f}"'
            f' text-anchor="end">{escape(label)}</text>'
        )
        parts.append(
            f'<rect class="bar" x="{label_w}" y="{y + 5}" width="{_fmt(max(w, 1.0))}"'
            f' height="{row - 10}"><title>{escape(bar.label)}: {bar.value}</title></rect>'
        )
        parts.append(
            f'<text class="value" x="{_fmt(label_w + max(w, 1.0) + 6)}"'
            f' y="{y + row / 2 + 5:.0f}">{bar.value}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def stacked_bar(chart_id: str, title: str, parts_in: Sequence[Part]) -> Markup:
    """One bar split into parts (active, forgotten, expired), with a legend beneath."""
    height, bar_h, left = 96, 36, 8
    parts = _open(chart_id, title, _desc(parts_in), height, "chart-svg stacked")
    total = sum(p.value for p in parts_in)
    plot_w = WIDTH - 2 * left
    x = float(left)
    if total == 0:
        parts.append(f'<rect class="empty" x="{left}" y="8" width="{plot_w}" height="{bar_h}"/>')
    for part in parts_in:
        if total == 0 or part.value == 0:
            continue
        w = plot_w * part.value / total
        parts.append(
            f'<rect class="{escape(part.css)}" x="{_fmt(x)}" y="8" width="{_fmt(w)}"'
            f' height="{bar_h}"><title>{escape(part.label)}: {part.value}</title></rect>'
        )
        x += w
    lx = float(left)
    for part in parts_in:
        parts.append(
            f'<rect class="{escape(part.css)}" x="{_fmt(lx)}" y="{bar_h + 26}"'
            ' width="14" height="14"/>'
        )
        text = f"{part.label}: {part.value}"
        parts.append(
            f'<text class="label" x="{_fmt(lx + 20)}" y="{bar_h + 38}">{escape(text)}</text>'
        )
        lx += 20 + 9 * len(text) + 24
    parts.append("</svg>")
    return Markup("".join(parts))
