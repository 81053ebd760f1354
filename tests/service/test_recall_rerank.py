"""Recall's optional second stage: a reranker behind RERANK_PROVIDER (issue 17).

The reranker is a local server speaking TEI's or Jina's ``/rerank`` wire format
(``tests/providers/rerank_server.py``), whose fake cross-encoder prefers the
memories holding the question's words.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator

import httpx
import pytest

from memory.providers.reranker import HttpReranker
from memory.recall.rerank import RerankStage
from storage.pool import make_pool

from ..providers.rerank_server import FakeReranker, Reply, relevance, serve_reranker
from .helpers import call

QUERY = "Which hospital does my sister work at these days?"
MEMORIES = [
    "My sister is a nurse.",
    "My sister lives in Braga with her two cats.",
    "My brother works at a bank in Lisbon.",
    "The hospital in Braga has a new wing for children.",
    "These days my sister works nights at the Braga hospital.",
    "I visited my sister last weekend.",
    "My mother worked as a teacher for thirty years.",
    "Which bakery sells the best bread these days?",
    # Less like the question to the embedder than the nurse, more to the fake cross-encoder.
    "Which days does she work? These days my sister does nights.",
    "I asked which hospital is best these days for my knee.",
]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["tei", "jina"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[FakeReranker, str]]:
    fake = FakeReranker(style=request.param)
    with serve_reranker(fake) as base_url:
        yield fake, base_url


@pytest.fixture
async def reranking(deps, server):
    """``deps`` with a reranker on the local server (depth 5), and its clock."""
    fake, base_url = server
    clock = Clock()
    reranker = HttpReranker(
        style=fake.style, base_url=base_url, client=httpx.AsyncClient(), owns_client=True
    )
    stage = RerankStage(reranker, depth=5, rest_s=30.0, clock=clock)
    yield dataclasses.replace(deps, reranker=stage), clock
    await reranker.aclose()


async def _store(deps, user: int) -> dict[int, str]:
    out = await call(
        deps, user, "remember_batch", items=[{"text": t} for t in MEMORIES], dedup_policy="insert"
    )
    return {r["memory_id"]: text for r, text in zip(out["results"], MEMORIES, strict=True)}


def _ids(out) -> list[int]:
    return [m["id"] for m in out["matches"]]


async def test_the_reranker_reorders_the_first_rankings_best(deps, alice, reranking, server):
    texts = await _store(deps, alice)
    reranked_deps, _ = reranking
    fake, _ = server
    plain = await call(deps, alice, "recall", query=QUERY, limit=8)
    first = _ids(plain)
    head = first[:5]  # depth 5 > limit 3: the reranker reads five
    expected = sorted(head, key=lambda key: (-relevance(QUERY, texts[key]), head.index(key)))
    assert expected[:3] != first[:3]  # the reranker changes what a user gets

    out = await call(reranked_deps, alice, "recall", query=QUERY, limit=3, explain=True)

    assert _ids(out) == expected[:3]
    assert texts[_ids(out)[0]] == "Which days does she work? These days my sister does nights."
    (request,) = fake.requests
    sent = request.body["texts" if fake.style == "tei" else "documents"]
    assert sent == [texts[key] for key in head] and request.body["query"] == QUERY
    scores = {m["id"]: m["score"] for m in plain["matches"]}
    for match in out["matches"]:
        assert match["score"] == scores[match["id"]]  # still the raw cosine
        assert match["explain"]["rerank"] == {
            "score": round(relevance(QUERY, texts[match["id"]]), 6),
            "first_rank": head.index(match["id"]) + 1,
        }
    prompt = await call(reranked_deps, alice, "build_context_prompt", user_prompt=QUERY, limit=3)
    assert prompt["memory_ids"] == expected[:3]


async def test_a_limit_deeper_than_the_stage_is_reranked_whole(deps, alice, reranking, server):
    texts = await _store(deps, alice)
    reranked_deps, _ = reranking
    fake, _ = server
    first = _ids(await call(deps, alice, "recall", query=QUERY, limit=7))

    out = await call(reranked_deps, alice, "recall", query=QUERY, limit=7)

    assert len(fake.requests[0].body["texts" if fake.style == "tei" else "documents"]) == 7
    assert _ids(out) == sorted(
        first, key=lambda key: (-relevance(QUERY, texts[key]), first.index(key))
    )


async def test_a_failing_reranker_costs_the_second_stage_not_the_recall(
    deps, alice, reranking, server, caplog
):
    texts = await _store(deps, alice)
    reranked_deps, clock = reranking
    fake, _ = server
    plain = _ids(await call(deps, alice, "recall", query=QUERY, limit=3))
    fake.script.append(Reply(status=503, body=b'{"error": "overloaded"}'))

    out = await call(reranked_deps, alice, "recall", query=QUERY, limit=3, explain=True)

    assert out["ok"] is True and _ids(out) == plain
    assert all("rerank" not in m["explain"] for m in out["matches"])
    assert "HTTP 503" in caplog.text
    assert not any(text in caplog.text for text in texts.values())
    # While it rests, the reranker is not asked; after, it is again.
    clock.now += 29
    assert _ids(await call(reranked_deps, alice, "recall", query=QUERY, limit=3)) == plain
    assert len(fake.requests) == 1
    clock.now += 2
    again = await call(reranked_deps, alice, "recall", query=QUERY, limit=3)
    assert len(fake.requests) == 2 and _ids(again) != plain


async def test_nothing_to_reorder_asks_nothing(deps, alice, reranking, server):
    reranked_deps, _ = reranking
    fake, _ = server
    await call(deps, alice, "remember", text="My sister works at the Braga hospital.")
    out = await call(reranked_deps, alice, "recall", query=QUERY)
    assert len(out["matches"]) == 1 and fake.requests == []


async def test_a_refused_input_costs_that_call_only(deps, alice, reranking, server):
    await _store(deps, alice)
    reranked_deps, _ = reranking
    fake, _ = server
    plain = _ids(await call(deps, alice, "recall", query=QUERY, limit=3))
    fake.script.append(Reply(status=422, body=b'{"error": "input too long"}'))

    assert _ids(await call(reranked_deps, alice, "recall", query=QUERY, limit=3)) == plain
    again = await call(reranked_deps, alice, "recall", query=QUERY, limit=3)

    assert len(fake.requests) == 2 and _ids(again) != plain  # no rest: asked again


class Broken:
    """A reranker failing in a way no reranker should (not a RerankError)."""

    def __init__(self) -> None:
        self.calls = 0

    async def rerank(self, query, documents):
        self.calls += 1
        raise OverflowError("int too large to convert to float")

    async def aclose(self) -> None:
        pass


async def test_any_failure_of_the_reranker_leaves_the_first_ranking(deps, alice, caplog):
    await _store(deps, alice)
    plain = _ids(await call(deps, alice, "recall", query=QUERY, limit=3))
    broken = Broken()
    broken_deps = dataclasses.replace(deps, reranker=RerankStage(broken, depth=5))

    out = await call(broken_deps, alice, "recall", query=QUERY, limit=3)

    assert out["ok"] is True and _ids(out) == plain and broken.calls == 1
    assert "unexpected OverflowError" in caplog.text


async def test_a_question_about_a_time_is_not_reranked(deps, alice, reranking, server):
    await _store(deps, alice)
    reranked_deps, _ = reranking
    fake, _ = server
    for question in (f"{QUERY} in March 2024", "What was the first hospital my sister worked at?"):
        plain = await call(deps, alice, "recall", query=question, limit=3)
        out = await call(reranked_deps, alice, "recall", query=question, limit=3)
        assert _ids(out) == _ids(plain)
    assert fake.requests == []


class AsksTheStore:
    """A reranker that, while it is asked, needs a connection of the same pool."""

    def __init__(self, deps, user: int, memory_id: int) -> None:
        self.deps, self.user, self.memory_id = deps, user, memory_id
        self.read: dict | None = None

    async def rerank(self, query, documents):
        self.read = await call(self.deps, self.user, "get_memory", id=self.memory_id)
        return [float(i) for i in range(len(documents))]

    async def aclose(self) -> None:
        pass


async def test_no_connection_is_held_while_the_reranker_is_asked(deps, alice, clean_db):
    ids = list(await _store(deps, alice))
    one = make_pool(clean_db, min_size=1, max_size=1, name="one-connection")
    await one.open(wait=True)
    try:
        single = dataclasses.replace(deps, pool=one)
        asks = AsksTheStore(single, alice, ids[0])
        reranked = dataclasses.replace(single, reranker=RerankStage(asks, depth=5))
        # With the one connection held by recall, get_memory would wait for it forever.
        out = await asyncio.wait_for(call(reranked, alice, "recall", query=QUERY, limit=3), 10)
    finally:
        await one.close()
    assert asks.read is not None and asks.read["memory"]["id"] == ids[0]
    assert len(out["matches"]) == 3


async def test_the_start_up_check_says_whether_the_reranker_answers(reranking, server):
    reranked_deps, clock = reranking
    fake, _ = server
    stage = reranked_deps.reranker
    assert await stage.check() is None and stage.will_ask(5, limit=5)
    fake.script.append(Reply(status=401, body=b'{"error": "bad key"}'))
    assert "HTTP 401" in (await stage.check() or "")
    assert not stage.will_ask(5, limit=5)  # recall does not try it again for a while
    clock.now += 31
    assert stage.will_ask(5, limit=5)
