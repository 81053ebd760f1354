"""The memories list: newest first, filters, search by meaning, bulk forget and tags."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import falcon.testing
import psycopg
import pytest

from api.runtime import Runtime
from auth.tokens import issue_access_token
from config.settings import Settings
from memory.providers.extractors import RulesExtractor
from memory.relations import extract_relations
from tests.api.conftest import Mcp
from tests.console.conftest import Browser, make_account, operation_key

FACTS = [
    ("My sister Maren lives in Trondheim.", ["family"]),
    ("I am allergic to peanuts.", ["health"]),
    ("I prefer aisle seats on long flights.", []),
    ("Ok", []),
]


def assistant_of(
    conductor: falcon.testing.ASGIConductor, runtime: Runtime, settings: Settings, user_id: int
) -> Mcp:
    """An assistant of another account's, over /mcp."""
    token = issue_access_token(
        runtime.keystore,
        settings,
        user_id=user_id,
        client_id="bobs-assistant",
        scope="memory:read memory:write",
    )
    return Mcp(conductor, token)


@pytest.fixture
def bob_mcp(
    conductor: falcon.testing.ASGIConductor,
    console_runtime: Runtime,
    console_settings: Settings,
    clean_db: str,
    owner: int,
) -> Mcp:
    bob = make_account(clean_db, "bob")
    return assistant_of(conductor, console_runtime, console_settings, bob)


async def _remember(mcp: Mcp, text: str, tags: list[str]) -> int:
    result = await mcp.call_tool("remember", {"text": text, "tags": tags})
    assert not result["isError"], result
    return int(result["structuredContent"]["memory_id"])


async def _seed(mcp: Mcp) -> list[int]:
    return [await _remember(mcp, text, tags) for text, tags in FACTS]


def _shown_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'name="ids" value="(\d+)"', html)]


async def _recalled(mcp: Mcp, query: str) -> list[int]:
    found = await mcp.call_tool("recall", {"query": query})
    return [m["id"] for m in found["structuredContent"]["matches"]]


async def test_the_list_shows_memories_newest_first_and_its_filters_narrow_it(
    browser: Browser, owner_mcp: Mcp
) -> None:
    sister, peanuts, aisle, ok = await _seed(owner_mcp)
    page = await browser.get("/console/memories")
    assert page.status_code == 200
    assert _shown_ids(page.text) == [ok, aisle, peanuts, sister]
    assert "My sister Maren lives in Trondheim." in page.text
    assert page.text.count("<h1>") == 1

    untagged = await browser.get("/console/memories?untagged=1")
    assert _shown_ids(untagged.text) == [ok, aisle]
    short = await browser.get("/console/memories?max_chars=5")
    assert _shown_ids(short.text) == [ok]
    long = await browser.get("/console/memories?min_chars=30&untagged=1")
    assert _shown_ids(long.text) == [aisle]
    tagged = await browser.get("/console/memories?tags=family")
    assert _shown_ids(tagged.text) == [sister]
    # a tag chip on a row links to that very filter
    assert 'href="/console/memories?tags=family"' in page.text

    bad = await browser.get("/console/memories?min_chars=9&max_chars=2")
    assert bad.status_code == 400
    assert 'role="alert"' in bad.text and "min_chars" in bad.text
    wrong = await browser.get("/console/memories?min_chars=lots")
    assert wrong.status_code == 400 and 'role="alert"' in wrong.text


async def test_forgotten_memories_show_only_when_asked_for(
    browser: Browser, owner_mcp: Mcp
) -> None:
    sister, peanuts, *_ = await _seed(owner_mcp)
    await owner_mcp.call_tool("forget", {"id": peanuts, "reason": "outgrew it"})
    assert peanuts not in _shown_ids((await browser.get("/console/memories")).text)
    everything = await browser.get("/console/memories?include_deleted=1")
    assert peanuts in _shown_ids(everything.text)
    assert "forgotten" in everything.text


async def test_paging_keeps_the_filters(browser: Browser, owner_mcp: Mcp) -> None:
    items = [{"text": f"Untagged fact number {n} about topic {n * 7}."} for n in range(22)]
    stored = await owner_mcp.call_tool("remember_batch", {"items": items})
    assert stored["structuredContent"]["summary"]["succeeded"] == 22
    first = await browser.get("/console/memories?untagged=1")
    assert len(_shown_ids(first.text)) == 20
    nxt = re.search(r'href="([^"]+)" rel="next"', first.text)
    assert nxt
    target = nxt.group(1).replace("&amp;", "&")
    assert parse_qs(urlsplit(target).query) == {"untagged": ["1"], "offset": ["20"]}
    second = await browser.get(target)
    assert len(_shown_ids(second.text)) == 2
    assert not set(_shown_ids(second.text)) & set(_shown_ids(first.text))
    assert 'rel="prev"' in second.text and 'rel="next"' not in second.text


async def test_the_search_box_finds_a_fact_by_meaning_with_its_score(
    browser: Browser, owner_mcp: Mcp
) -> None:
    sister, *_ = await _seed(owner_mcp)
    page = await browser.get("/console/memories?q=which+city+is+my+sibling+in&explain=1")
    assert page.status_code == 200
    assert _shown_ids(page.text)[0] == sister
    score = re.search(r'<span class="score">([0-9.]+)</span>', page.text)
    assert score and 0 < float(score.group(1)) <= 1
    assert "Why this rank" in page.text and "Meaning (cosine)" in page.text
    plain = await browser.get("/console/memories?q=which+city+is+my+sibling+in")
    assert "Why this rank" not in plain.text


async def test_a_search_says_which_match_a_newer_memory_contradicts(
    browser: Browser, owner_mcp: Mcp
) -> None:
    lisbon = await _remember(owner_mcp, "I live in Lisbon.", [])
    berlin = await _remember(owner_mcp, "I moved to Berlin last spring.", [])
    page = await browser.get("/console/memories?q=where+do+I+live&explain=1")
    assert _shown_ids(page.text)[:2] == [berlin, lisbon]
    older = re.search(r'<p class="small older">(.*?)</p>', page.text, re.S)
    assert older and f'href="/console/memories/{berlin}"' in older.group(1)
    assert "A newer memory says otherwise" in older.group(1)
    assert "Latest truth" in page.text


async def test_a_search_shows_a_match_the_session_hop_brought(
    browser: Browser, owner_mcp: Mcp
) -> None:
    crowd = [
        "Porto has a lot of bakeries near the river.",
        "I bought bread at a bakery in Porto on Saturday.",
        "The bakery on my street in Porto opens at seven.",
        "I ate too many pastries in Porto last year.",
        "Porto's best bakeries are busy on Sundays.",
        "A bakery in Porto sells croissants with ham.",
        "The hotel in Porto served pastries for breakfast.",
        "There is a famous bakery chain in Porto.",
    ]
    await owner_mcp.call_tool("remember_batch", {"items": [{"text": t} for t in crowd]})
    chat = [
        "Which bakery in Porto had the best pastries?",
        "Definitely Manteigaria, their pastel de nata was amazing.",
    ]
    stored = await owner_mcp.call_tool(
        "remember_batch", {"items": [{"text": t, "session_id": "chat-1"} for t in chat]}
    )
    question, answer = (r["memory_id"] for r in stored["structuredContent"]["results"])
    page = await browser.get("/console/memories?q=which+bakery+in+porto+did+i+like&explain=1")
    assert page.status_code == 200
    assert answer in _shown_ids(page.text)
    assert f'stored next to <a href="/console/memories/{question}">#{question}</a>' in page.text


async def test_a_search_shows_a_match_the_graph_hop_brought(
    browser: Browser, owner_mcp: Mcp, console_runtime: Runtime, owner: int
) -> None:
    crowd = [
        f"{name}'s boss lives in {city}."
        for name, city in [("Ben Novak", "Lyon"), ("Chloe Tanaka", "Oslo"), ("Dmitri Larsen", "Riga"),
                           ("Elena Moreau", "Quito"), ("Farid Haddad", "Accra"), ("Grace Okafor", "Hanoi"),
                           ("Hiro Kim", "Seoul"), ("Ines Costa", "Lima"), ("Jonas Berg", "Bergen")]
    ]  # fmt: skip
    stored = await owner_mcp.call_tool(
        "remember_batch",
        {
            "items": [
                {"text": t}
                for t in [*crowd, "My manager is Ana Silva.", "Ana Silva lives in Porto."]
            ]
        },
    )
    ids = [int(r["memory_id"]) for r in stored["structuredContent"]["results"]]
    for memory_id in ids:  # the worker's part, inline
        await extract_relations(console_runtime.deps, owner, memory_id, extractor=RulesExtractor())
    role, answer = ids[-2:]
    page = await browser.get("/console/memories?q=where+does+my+manager+live&explain=1")
    assert page.status_code == 200
    assert answer in _shown_ids(page.text)
    assert (
        f'names someone or something <a href="/console/memories/{role}">#{role}</a> names'
        in page.text
    )


async def test_bulk_forget_takes_the_memories_out_of_recall(
    browser: Browser, owner_mcp: Mcp
) -> None:
    sister, peanuts, aisle, _ok = await _seed(owner_mcp)
    page = await browser.get("/console/memories?tags=family,health")
    assert 'data-select-all="ids"' in page.text and "data-confirm" in page.text
    back = re.search(r'name="back" value="([^"]*)"', page.text)
    assert back
    result = await browser.post(
        "/console/memories",
        [
            ("ids", sister),
            ("ids", peanuts),
            ("action", "forget"),
            ("reason", "no longer true"),
            ("operation", operation_key(page.text)),
            ("back", back.group(1).replace("&amp;", "&")),
        ],
    )
    assert result.status_code == 303
    location = urlsplit(result.headers["location"])
    assert location.path == "/console/memories"
    assert parse_qs(location.query)["tags"] == ["family,health"]  # the filters are kept
    assert parse_qs(location.query)["count"] == ["2"]
    after = await browser.get(result.headers["location"])
    assert "2 memories forgotten." in after.text
    assert _shown_ids(after.text) == []

    assert sister not in await _recalled(owner_mcp, "where does my sister live")
    assert peanuts not in await _recalled(owner_mcp, "food allergies")
    assert aisle in await _recalled(owner_mcp, "seat preference on planes")
    tomb = await owner_mcp.call_tool("get_memory", {"id": sister})
    assert tomb["structuredContent"]["memory"]["forget_reason"] == "no longer true"


async def test_a_double_submitted_bulk_form_is_done_once(browser: Browser, owner_mcp: Mcp) -> None:
    sister, peanuts, *_ = await _seed(owner_mcp)
    page = await browser.get("/console/memories")
    form = [
        ("ids", sister),
        ("ids", peanuts),
        ("action", "forget"),
        ("operation", operation_key(page.text)),
    ]
    first = await browser.post("/console/memories", form)
    again = await browser.post("/console/memories", form)
    # The second is the first's answer: not "2 had been forgotten already".
    assert first.headers["location"] == again.headers["location"]
    assert "already" not in again.headers["location"]

    fresh = await browser.get("/console/memories?include_deleted=1")
    form[-1] = ("operation", operation_key(fresh.text))
    third = await browser.post("/console/memories", form)
    assert parse_qs(urlsplit(third.headers["location"]).query)["already"] == ["2"]


async def test_bulk_tags_are_added_and_removed(browser: Browser, owner_mcp: Mcp) -> None:
    sister, peanuts, aisle, _ok = await _seed(owner_mcp)
    page = await browser.get("/console/memories")
    added = await browser.post(
        "/console/memories",
        [
            ("ids", sister),
            ("ids", aisle),
            ("action", "add-tags"),
            ("bulk_tags", "Travel, important"),
            ("operation", operation_key(page.text)),
        ],
    )
    assert added.status_code == 303
    assert "Tags added to 2 memories." in (await browser.get(added.headers["location"])).text
    got = await owner_mcp.call_tool("get_memory", {"id": sister})
    assert got["structuredContent"]["memory"]["tags"] == ["family", "travel", "important"]
    got = await owner_mcp.call_tool("get_memory", {"id": aisle})
    assert got["structuredContent"]["memory"]["tags"] == ["travel", "important"]

    page = await browser.get("/console/memories")
    removed = await browser.post(
        "/console/memories",
        [
            ("ids", sister),
            ("ids", aisle),
            ("ids", peanuts),
            ("action", "remove-tags"),
            ("bulk_tags", "travel"),
            ("operation", operation_key(page.text)),
        ],
    )
    assert parse_qs(urlsplit(removed.headers["location"]).query)["count"] == ["2"]
    got = await owner_mcp.call_tool("get_memory", {"id": sister})
    assert got["structuredContent"]["memory"]["tags"] == ["family", "important"]
    got = await owner_mcp.call_tool("get_memory", {"id": peanuts})
    assert got["structuredContent"]["memory"]["tags"] == ["health"]


async def test_a_bulk_form_without_a_selection_or_tags_changes_nothing(
    browser: Browser, owner_mcp: Mcp
) -> None:
    sister, *_ = await _seed(owner_mcp)
    page = await browser.get("/console/memories")
    key = operation_key(page.text)
    none = await browser.post("/console/memories", [("action", "forget"), ("operation", key)])
    assert none.status_code == 400 and 'role="alert"' in none.text
    empty = await browser.post(
        "/console/memories",
        [("ids", sister), ("action", "add-tags"), ("bulk_tags", " , "), ("operation", key)],
    )
    assert empty.status_code == 400 and 'role="alert"' in empty.text
    got = await owner_mcp.call_tool("get_memory", {"id": sister})
    assert got["structuredContent"]["memory"]["tags"] == ["family"]
    assert got["structuredContent"]["memory"]["deleted_at"] is None


async def test_a_bulk_post_without_the_csrf_token_is_refused_and_changes_nothing(
    browser: Browser, owner_mcp: Mcp
) -> None:
    sister, *_ = await _seed(owner_mcp)
    for action in ("forget", "add-tags", "remove-tags"):
        result = await browser.post(
            "/console/memories",
            [("ids", sister), ("action", action), ("bulk_tags", "family,x1")],
            csrf=False,
        )
        assert result.status_code == 403
    got = await owner_mcp.call_tool("get_memory", {"id": sister})
    assert got["structuredContent"]["memory"]["tags"] == ["family"]
    assert got["structuredContent"]["memory"]["deleted_at"] is None


async def test_another_users_ids_in_a_bulk_form_change_nothing_of_theirs(
    browser: Browser, owner_mcp: Mcp, bob_mcp: Mcp
) -> None:
    bob_id = await _remember(bob_mcp, "Bob's bike lock code is kept at home.", ["home"])
    mine = await _remember(owner_mcp, "I water the plants on Sundays.", [])
    page = await browser.get("/console/memories")
    key = operation_key(page.text)
    result = await browser.post(
        "/console/memories",
        [("ids", bob_id), ("ids", mine), ("action", "forget"), ("operation", key)],
    )
    query = parse_qs(urlsplit(result.headers["location"]).query)
    assert query["count"] == ["1"] and query["failed"] == ["1"]
    tagging = await browser.post(
        "/console/memories",
        [("ids", bob_id), ("action", "add-tags"), ("bulk_tags", "mine"), ("operation", key)],
    )
    assert parse_qs(urlsplit(tagging.headers["location"]).query)["failed"] == ["1"]
    got = await bob_mcp.call_tool("get_memory", {"id": bob_id})
    assert got["structuredContent"]["memory"]["deleted_at"] is None
    assert got["structuredContent"]["memory"]["tags"] == ["home"]
    assert bob_id not in _shown_ids((await browser.get("/console/memories")).text)


async def test_a_bulk_selection_over_the_batch_limit_is_refused_before_any_call(
    browser: Browser, console_settings: Settings, console_runtime: Runtime, clean_db: str
) -> None:
    too_many = [("ids", str(i)) for i in range(1, console_settings.max_batch_size + 2)]
    form = [*too_many, ("action", "add-tags"), ("bulk_tags", "x")]
    result = await browser.post("/console/memories", form)
    assert result.status_code == 400
    assert f"at most {console_settings.max_batch_size}" in result.text
    assert console_runtime.audit is not None
    await console_runtime.audit.flush()
    with psycopg.connect(clean_db) as conn:
        calls = conn.execute(
            "SELECT count(*) FROM audit_events WHERE tool IN ('get_memory', 'update_memory_batch')"
        ).fetchone()
    assert calls == (0,)
