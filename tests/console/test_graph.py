"""The graph page: an entity's relations, drawn and listed, each edge linking to its memory."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from urllib.parse import quote

from api.runtime import Runtime
from memory.providers.extractors import RulesExtractor
from memory.relations import extract_relations
from tests.api.conftest import Mcp
from tests.console.conftest import Browser

NS = {"s": "http://www.w3.org/2000/svg"}
_SVG = re.compile(r"<svg\b.*?</svg>", re.S)


async def _remember(mcp: Mcp, runtime: Runtime, user_id: int, text: str) -> int:
    """Store a memory and run its relation extraction (a worker's part, done inline)."""
    stored = await mcp.call_tool("remember", {"text": text})
    memory_id = int(stored["structuredContent"]["memory_id"])
    await extract_relations(runtime.deps, user_id, memory_id, extractor=RulesExtractor())
    return memory_id


async def test_an_entity_s_relations_are_drawn_and_listed_with_their_memories(
    browser: Browser, owner_mcp: Mcp, console_runtime: Runtime, owner: int
) -> None:
    sister = await _remember(owner_mcp, console_runtime, owner, "My sister Ana lives in Porto.")
    page = await browser.get("/console/graph?entity=Ana&hops=1")
    assert page.status_code == 200
    assert "2 relations within 1 hop" in page.text
    # The table: both edges, each with a link to the memory it came from.
    rows = re.findall(r"<tr>\s*<td>(.*?)</tr>", page.text, re.S)
    assert len(rows) == 2
    assert all(f'href="/console/memories/{sister}"' in row for row in rows)
    assert "sister of" in rows[0] + rows[1] and "lives in" in rows[0] + rows[1]
    assert "My sister Ana lives in Porto." in page.text

    match = _SVG.search(page.text)
    assert match, "no drawing"
    root = ET.fromstring(match.group(0))
    edge_links = root.findall(".//s:g[@class='edges']/s:a", NS)
    assert {a.get("href") for a in edge_links} == {f"/console/memories/{sister}"}
    assert len(edge_links) == 2
    names = {
        a.findtext("s:title", namespaces=NS) for a in root.findall(".//s:g[@class='nodes']/s:a", NS)
    }
    assert names == {"Ana", "the user", "Porto"}
    # A node leads to its own graph.
    porto = await browser.get("/console/graph?entity=Porto&hops=1")
    assert "1 relation within 1 hop" in porto.text and "lives in" in porto.text


async def test_a_role_phrase_and_the_user_find_the_same_edges(
    browser: Browser, owner_mcp: Mcp, console_runtime: Runtime, owner: int
) -> None:
    await _remember(owner_mcp, console_runtime, owner, "My sister Ana lives in Porto.")
    mine = await browser.get("/console/graph?entity=" + quote("my sister") + "&hops=1")
    assert "2 relations within 1 hop" in mine.text
    me = await browser.get("/console/graph?entity=" + quote("the user") + "&hops=1")
    assert "1 relation within 1 hop" in me.text and "sister of" in me.text


async def test_no_entity_shows_the_box_and_an_unknown_one_says_so(browser: Browser) -> None:
    empty = await browser.get("/console/graph")
    assert empty.status_code == 200
    assert 'name="entity"' in empty.text and "<svg" not in empty.text
    assert 'href="/console/graph?entity=the+user&amp;hops=2"' in empty.text
    nothing = await browser.get("/console/graph?entity=Zanzibar")
    assert nothing.status_code == 200
    assert "No relations found for <strong>Zanzibar</strong>" in nothing.text


async def test_another_user_s_relations_are_not_shown(
    browser: Browser, owner_mcp: Mcp, console_runtime: Runtime, owner: int, clean_db: str
) -> None:
    from auth.tokens import issue_access_token
    from tests.console.conftest import make_account

    bob = make_account(clean_db, "bob")
    token = issue_access_token(
        console_runtime.keystore,
        console_runtime.settings,
        user_id=bob,
        client_id="bobs-assistant",
        scope="memory:read memory:write",
    )
    await _remember(Mcp(owner_mcp.conductor, token), console_runtime, bob, "Dana lives in Oslo.")
    page = await browser.get("/console/graph?entity=Dana")
    assert "No relations found" in page.text and "Oslo" not in page.text


async def test_a_hostile_entity_name_stays_text(
    browser: Browser, owner_mcp: Mcp, console_runtime: Runtime, owner: int
) -> None:
    # The rules take "<script>" as a place: a name from a memory that must stay text.
    await _remember(owner_mcp, console_runtime, owner, "Zoe lives in <script>.")
    page = await browser.get("/console/graph?entity=Zoe&hops=1")
    assert page.status_code == 200 and "1 relation within 1 hop" in page.text
    assert "<script>" not in page.text.replace('<script src="', "")
    match = _SVG.search(page.text)
    assert match, "no drawing"
    root = ET.fromstring(match.group(0))
    assert root.find(".//s:script", NS) is None
    labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "<script>" in labels
    asked = await browser.get("/console/graph?entity=" + quote('<script>alert("x")</script>'))
    assert asked.status_code == 200
    assert "<script>alert" not in asked.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in asked.text
    bad_hops = await browser.get("/console/graph?entity=Zoe&hops=lots")
    assert bad_hops.status_code == 200 and "within 2 hops" in bad_hops.text
