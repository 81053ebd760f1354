"""A small node-link drawing of relation edges, as SVG: pure and deterministic.

Layout: the entity asked about sits in the centre (when no node bears its
name, e.g. a role phrase like "my sister", the best-connected node does);
its neighbours sit on a circle around it, the second hop on a wider circle,
and so on, each ring in a fixed order (ring one by name, later rings by the
angle of the node that reached them, then name). The same edges always give
the same picture.

Every node links to that entity's own graph, every edge to the memory it
was extracted from. The SVG is built with :mod:`xml.etree.ElementTree`,
which escapes every name and predicate; characters XML cannot carry are
replaced, so the output always parses and no label can become markup.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SVG_NS = "http://www.w3.org/2000/svg"
#: Nodes drawn at most; the page's table lists every edge.
MAX_NODES = 40
NODE_R = 14.0
#: Distance between rings.
RING = 130.0
#: Space along a ring each node needs, so labels do not collide.
SPACING = 95.0
#: Room around the outer ring for labels.
MARGIN = 110.0
#: How far apart parallel edges between the same two nodes bend.
BEND = 30.0
LABEL_CHARS = 24


@dataclass(frozen=True)
class Edge:
    subject: str
    predicate: str
    object: str
    memory_id: int


@dataclass(frozen=True)
class Node:
    name: str
    x: float
    y: float
    hop: int


@dataclass(frozen=True)
class Layout:
    nodes: tuple[Node, ...]
    #: Edges between drawn nodes, with their two nodes' indexes in ``nodes``.
    edges: tuple[tuple[Edge, int, int], ...]
    radius: float
    #: Nodes left out of the drawing (over :data:`MAX_NODES`).
    hidden: int


def _key(name: str) -> str:
    return name.casefold()


def layout(center: str, edges: Sequence[Edge], *, max_nodes: int = MAX_NODES) -> Layout:
    """Place the nodes of ``edges`` on rings around ``center``."""
    names: dict[str, str] = {}
    neighbours: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        a, b = _key(e.subject), _key(e.object)
        names.setdefault(a, e.subject)
        names.setdefault(b, e.object)
        if a != b:
            neighbours[a].add(b)
            neighbours[b].add(a)
    if not names:
        return Layout((), (), 0.0, 0)
    start = _key(center)
    if start not in names:
        start = min(names, key=lambda k: (-len(neighbours[k]), k))
    # Breadth-first from the centre; each node remembers who reached it.
    hop = {start: 0}
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for there in sorted(neighbours[here]):
            if there not in hop:
                hop[there] = hop[here] + 1
                parent[there] = here
                queue.append(there)
    far = max(hop.values()) + 1
    for k in names:  # not reachable from the centre (a separate piece)
        hop.setdefault(k, far)
    kept = sorted(names, key=lambda k: (hop[k], k))[:max_nodes]
    angle: dict[str, float] = {start: -math.pi / 2}
    place: dict[str, tuple[float, float]] = {start: (0.0, 0.0)}
    radius = 0.0
    rings: dict[int, list[str]] = defaultdict(list)
    for k in kept[1:]:
        rings[hop[k]].append(k)
    for ring in sorted(rings):
        members = sorted(rings[ring], key=lambda k: (angle.get(parent.get(k, ""), 0.0), k))
        radius = max(radius + RING, len(members) * SPACING / (2 * math.pi))
        for i, k in enumerate(members):
            theta = -math.pi / 2 + 2 * math.pi * i / len(members)
            angle[k] = theta
            place[k] = (round(radius * math.cos(theta), 1), round(radius * math.sin(theta), 1))
    index = {k: i for i, k in enumerate(kept)}
    nodes = tuple(Node(names[k], place[k][0], place[k][1], hop[k]) for k in kept)
    drawn = tuple(
        (e, index[_key(e.subject)], index[_key(e.object)])
        for e in edges
        if _key(e.subject) in index and _key(e.object) in index
    )
    return Layout(nodes, drawn, radius, len(names) - len(kept))


def draw(
    center: str,
    edges: Sequence[Edge],
    *,
    entity_href: Callable[[str], str],
    memory_href: Callable[[int], str],
    title: str,
    max_nodes: int = MAX_NODES,
) -> str:
    """The SVG element (a string) of ``edges`` around ``center``; empty without edges."""
    placed = layout(center, edges, max_nodes=max_nodes)
    if not placed.nodes:
        return ""
    extent = placed.radius + MARGIN
    size = _num(2 * extent)
    svg = ET.Element(
        "svg",
        {
            "xmlns": SVG_NS,
            "viewBox": f"{_num(-extent)} {_num(-extent)} {size} {size}",
            "class": "graph",
            "role": "group",
            "aria-labelledby": "graph-title",
        },
    )
    _sub(svg, "title", {"id": "graph-title"}, title)
    defs = _sub(svg, "defs")
    marker = _sub(
        defs,
        "marker",
        {
            "id": "graph-arrow",
            "viewBox": "0 0 10 10",
            "refX": "9",
            "refY": "5",
            "markerWidth": "7",
            "markerHeight": "7",
            "orient": "auto-start-reverse",
        },
    )
    _sub(marker, "path", {"d": "M0,0 L10,5 L0,10 z", "class": "arrow"})
    edge_group = _sub(svg, "g", {"class": "edges"})
    pairs: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, (_, a, b) in enumerate(placed.edges):
        pairs[(min(a, b), max(a, b))].append(i)
    for i, (edge, a, b) in enumerate(placed.edges):
        siblings = pairs[(min(a, b), max(a, b))]
        offset = (siblings.index(i) - (len(siblings) - 1) / 2) * BEND
        if a > b:  # the same bend whichever way an edge points
            offset = -offset
        path, (lx, ly) = _edge_path(placed.nodes[a], placed.nodes[b], offset)
        link = _sub(edge_group, "a", {"href": memory_href(edge.memory_id), "class": "edge"})
        _sub(
            link,
            "title",
            text=f"{edge.subject} {edge.predicate} {edge.object} (memory {edge.memory_id})",
        )
        _sub(link, "path", {"d": path, "marker-end": "url(#graph-arrow)"})
        _sub(
            link,
            "text",
            {"x": _num(lx), "y": _num(ly), "text-anchor": "middle", "class": "predicate"},
            _short(edge.predicate),
        )
    node_group = _sub(svg, "g", {"class": "nodes"})
    for node in placed.nodes:
        css = "node center" if node.hop == 0 else "node"
        link = _sub(node_group, "a", {"href": entity_href(node.name), "class": css})
        _sub(link, "title", text=node.name)
        _sub(link, "circle", {"cx": _num(node.x), "cy": _num(node.y), "r": _num(NODE_R)})
        _sub(
            link,
            "text",
            {
                "x": _num(node.x),
                "y": _num(node.y + NODE_R + 16),
                "text-anchor": "middle",
                "class": "label",
            },
            _short(node.name),
        )
    return ET.tostring(svg, encoding="unicode")


def _edge_path(a: Node, b: Node, offset: float) -> tuple[str, tuple[float, float]]:
    """A quadratic curve from the rim of ``a`` to the rim of ``b``, and its label's point."""
    if a is b:  # a loop above the node
        x, y = a.x, a.y - NODE_R
        d = f"M{_num(x - 6)},{_num(y)} C{_num(x - 45)},{_num(y - 60)} "
        d += f"{_num(x + 45)},{_num(y - 60)} {_num(x + 6)},{_num(y)}"
        return d, (x, y - 50)
    dx, dy = b.x - a.x, b.y - a.y
    length = math.hypot(dx, dy) or 1.0
    nx, ny = -dy / length, dx / length
    cx, cy = (a.x + b.x) / 2 + nx * offset, (a.y + b.y) / 2 + ny * offset
    x1, y1 = _towards(a.x, a.y, cx, cy, NODE_R)
    x2, y2 = _towards(b.x, b.y, cx, cy, NODE_R + 2)
    d = f"M{_num(x1)},{_num(y1)} Q{_num(cx)},{_num(cy)} {_num(x2)},{_num(y2)}"
    return d, (0.25 * x1 + 0.5 * cx + 0.25 * x2, 0.25 * y1 + 0.5 * cy + 0.25 * y2 - 4)


def _towards(x: float, y: float, tx: float, ty: float, distance: float) -> tuple[float, float]:
    dx, dy = tx - x, ty - y
    length = math.hypot(dx, dy) or 1.0
    return x + dx / length * distance, y + dy / length * distance


def _sub(
    parent: ET.Element, tag: str, attrs: dict[str, str] | None = None, text: str | None = None
) -> ET.Element:
    element = ET.SubElement(parent, tag, {k: _clean(v) for k, v in (attrs or {}).items()})
    if text is not None:
        element.text = _clean(text)
    return element


def _clean(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot hold (controls, lone surrogates) as spaces."""
    return "".join(
        ch if (ch >= " " and not "\ud800" <= ch <= "\udfff" and ch not in "\ufffe\uffff") else " "
        for ch in text
    )


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1].rstrip() + "…"


def _num(value: float) -> str:
    """A coordinate with at most one decimal and no ``-0``."""
    text = f"{value:.1f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text
