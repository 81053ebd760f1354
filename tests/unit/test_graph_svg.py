"""The graph drawing: deterministic layout, links, and labels that stay text."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from api.console.graph_svg import Edge, draw, layout

NS = {"s": "http://www.w3.org/2000/svg"}
SISTER = [
    Edge("Ana", "sister of", "the user", 7),
    Edge("Ana", "lives in", "Porto", 7),
    Edge("Porto", "is in", "Portugal", 9),
]


def _draw(center: str, edges: list[Edge]) -> str:
    return draw(
        center,
        edges,
        entity_href=lambda name: "/console/graph?entity=" + name,
        memory_href=lambda memory_id: f"/console/memories/{memory_id}",
        title=f"Relations of {center}",
    )


def test_the_entity_is_in_the_centre_and_hops_on_wider_rings() -> None:
    placed = layout("ana", SISTER)
    nodes = {n.name: n for n in placed.nodes}
    assert (nodes["Ana"].x, nodes["Ana"].y, nodes["Ana"].hop) == (0.0, 0.0, 0)
    assert nodes["Porto"].hop == nodes["the user"].hop == 1
    assert nodes["Portugal"].hop == 2
    one = math.hypot(nodes["Porto"].x, nodes["Porto"].y)
    two = math.hypot(nodes["Portugal"].x, nodes["Portugal"].y)
    assert one > 0 and two > one
    assert math.isclose(one, math.hypot(nodes["the user"].x, nodes["the user"].y), rel_tol=1e-3)


def test_a_role_phrase_centres_the_best_connected_node() -> None:
    placed = layout("my sister", SISTER)
    centre = [n for n in placed.nodes if n.hop == 0]
    # Ana and Porto have two neighbours each; the tie goes to the first name.
    assert [(n.name, n.x, n.y) for n in centre] == [("Ana", 0.0, 0.0)]


def test_the_same_edges_always_give_the_same_picture() -> None:
    assert _draw("Ana", SISTER) == _draw("Ana", list(SISTER))
    # The places do not depend on the order the edges came in.
    shuffled = layout("Ana", [SISTER[2], SISTER[0], SISTER[1]])
    assert {(n.name, n.x, n.y) for n in shuffled.nodes} == {
        (n.name, n.x, n.y) for n in layout("Ana", SISTER).nodes
    }


def test_every_edge_links_to_its_memory_and_every_node_to_its_graph() -> None:
    root = ET.fromstring(_draw("Ana", SISTER))
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    edges = root.findall(".//s:g[@class='edges']/s:a", NS)
    assert [a.get("href") for a in edges] == [
        "/console/memories/7",
        "/console/memories/7",
        "/console/memories/9",
    ]
    assert [a.findtext("s:text", namespaces=NS) for a in edges] == [
        "sister of",
        "lives in",
        "is in",
    ]
    nodes = root.findall(".//s:g[@class='nodes']/s:a", NS)
    assert sorted(a.findtext("s:title", namespaces=NS) or "" for a in nodes) == [
        "Ana",
        "Porto",
        "Portugal",
        "the user",
    ]
    assert all((a.get("href") or "").startswith("/console/graph?entity=") for a in nodes)


def test_a_hostile_name_stays_text() -> None:
    hostile = '<script>alert("x")</script>&amp;\x00\x1b'
    svg = _draw(hostile, [Edge(hostile, 'likes "<b>"', "Porto", 3)])
    assert "<script>" not in svg and "<b>" not in svg
    root = ET.fromstring(svg)  # parses: nothing broke out of its element or attribute
    assert root.find(".//s:script", NS) is None and root.find(".//s:b", NS) is None
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert '<script>alert("x")</script>&amp;  ' in titles
    hrefs = [a.get("href") for a in root.iter("{http://www.w3.org/2000/svg}a")]
    assert "/console/graph?entity=" + '<script>alert("x")</script>&amp;  ' in hrefs


def test_parallel_edges_bend_apart_and_loops_are_drawn() -> None:
    edges = [
        Edge("Ana", "likes", "Bo", 1),
        Edge("Bo", "likes", "Ana", 2),
        Edge("Bo", "is", "Bo", 3),
    ]
    root = ET.fromstring(_draw("Ana", edges))
    paths = [p.get("d") for p in root.findall(".//s:g[@class='edges']/s:a/s:path", NS)]
    assert len(paths) == 3 and len(set(paths)) == 3


def test_too_many_nodes_are_left_to_the_list() -> None:
    edges = [Edge("the user", "knows", f"Person {i:02d}", i + 1) for i in range(50)]
    placed = layout("the user", edges, max_nodes=10)
    assert len(placed.nodes) == 10 and placed.hidden == 41
    assert len(placed.edges) == 9
    assert layout("x", []).nodes == ()
    assert _draw("x", []) == ""
