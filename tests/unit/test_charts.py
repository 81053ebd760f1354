"""The stats page's SVG charts: valid SVG, accessible, every figure present as text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from api.console import charts

SVG = "{http://www.w3.org/2000/svg}"


def parse(markup: str) -> ET.Element:
    root = ET.fromstring(str(markup))
    assert root.tag == SVG + "svg"
    assert root.get("role") == "img"
    labelled = (root.get("aria-labelledby") or "").split()
    ids = {e.get("id") for e in root.iter() if e.get("id")}
    assert labelled and set(labelled) <= ids  # it names its own title and desc
    assert root.find(SVG + "title") is not None and root.find(SVG + "desc") is not None
    return root


def texts(root: ET.Element) -> list[str]:
    return [e.text or "" for e in root.iter(SVG + "text")]


def test_a_column_chart_draws_a_bar_per_period_scaled_to_the_largest() -> None:
    bars = [charts.Bar("Week of 2026-05-04", 3, "May 4"), charts.Bar("Week of 2026-05-11", 6)]
    root = parse(charts.column_chart("weeks", "Added per week", bars))
    rects = list(root.iter(SVG + "rect"))
    assert len(rects) == 2
    heights = [float(r.get("height") or 0) for r in rects]
    assert heights[1] == 2 * heights[0] > 0
    assert {"3", "6", "May 4", "Week of 2026-05-11"} <= set(texts(root))
    desc = root.find(SVG + "desc")
    assert desc is not None and desc.text == "Week of 2026-05-04: 3; Week of 2026-05-11: 6"


def test_a_column_chart_can_label_every_nth_period() -> None:
    bars = [charts.Bar(f"day {i}", i, f"d{i}") for i in range(10)]
    root = parse(charts.column_chart("days", "Calls", bars, label_every=5))
    labels = [e.text for e in root.iter(SVG + "text") if e.get("class") == "label"]
    assert labels == ["d0", "d5"]


def test_an_empty_chart_is_still_valid_and_says_so() -> None:
    root = parse(charts.bar_chart("tags", "Top tags", []))
    desc = root.find(SVG + "desc")
    assert desc is not None and desc.text == "No data yet."
    zeros = parse(charts.column_chart("w", "Weeks", [charts.Bar("a", 0), charts.Bar("b", 0)]))
    assert all(float(r.get("height") or 0) == 0 for r in zeros.iter(SVG + "rect"))


def test_labels_are_escaped_so_a_tag_cannot_inject_markup() -> None:
    evil = '<script>alert("x")</script> & co'
    markup = charts.bar_chart("apps", "Apps & more", [charts.Bar(evil, 2)])
    assert "<script>" not in markup
    root = parse(markup)
    titles = [e.text for e in root.iter(SVG + "title")]
    assert "Apps & more" in titles and f"{evil}: 2" in titles
    assert "2" in texts(root)


def test_long_labels_are_shortened_on_the_bar_but_whole_in_its_title() -> None:
    name = "a-very-long-client-name-for-an-assistant"
    root = parse(charts.bar_chart("apps", "Apps", [charts.Bar(name, 5), charts.Bar("b", 1)]))
    assert any(t.endswith("…") and len(t) <= charts.MAX_LABEL_CHARS for t in texts(root))
    assert f"{name}: 5" in [e.text for e in root.iter(SVG + "title")]
    widths = [float(r.get("width") or 0) for r in root.iter(SVG + "rect")]
    assert widths[0] == 5 * widths[1]


def test_a_stacked_bar_splits_by_share_and_has_a_legend() -> None:
    parts = [
        charts.Part("Active", 3, "part-active"),
        charts.Part("Forgotten", 1, "part-forgotten"),
        charts.Part("Expired", 0, "part-expired"),
    ]
    root = parse(charts.stacked_bar("state", "Active and forgotten", parts))
    segments = [r for r in root.iter(SVG + "rect") if r.find(SVG + "title") is not None]
    assert [s.get("class") for s in segments] == ["part-active", "part-forgotten"]
    widths = [float(s.get("width") or 0) for s in segments]
    assert widths[0] == 3 * widths[1]
    assert {"Active: 3", "Forgotten: 1", "Expired: 0"} <= set(texts(root))
