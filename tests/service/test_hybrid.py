"""Hybrid recall: lexical and vector candidates fused (memory.rules.ranking; migration 0002)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from memory.rules import ranking

from .helpers import call, cosine, expire, named_terms, remember_many, sql

NAMES = [
    "Petrovic is my landlord.",
    "Jankovic is my tennis partner.",
    "Markovic is my accountant.",
    "Popovic is the new head of sales.",
    "Nikolic is my daughter's piano teacher.",
]
VUKOVIC = "Shopping list for Saturday: apples, rye bread, basil and goat cheese; Vukovic wants the ladder back."

NUMBERS = [
    "My gym locker is number 4871.",
    "The office room number is 4178.",
    "My old flat was number 1847.",
    "My bank card ends in 8147.",
    "The bus I take to work is the 481.",
]
PASSPORT = "Renew the passport before 2031; the reference on the form is 4817."


async def _cosine_rank(deps, query: str, target: str, others: list[str]) -> int:
    """1-based rank of ``target`` among ``others`` by cosine alone."""
    mine = await cosine(deps, query, target)
    return 1 + sum([await cosine(deps, query, t) > mine for t in others])


@pytest.mark.parametrize(
    ("query", "target", "others"),
    [("Who is Vukovic?", VUKOVIC, NAMES), ("4817", PASSPORT, NUMBERS)],
    ids=["proper-noun", "number"],
)
async def test_rare_name_or_number_comes_first(deps, alice, query, target, others):
    ids = await remember_many(deps, alice, [*others, target])
    wanted = ids[-1]
    # The premise: by meaning alone the look-alike names and numbers win.
    assert await _cosine_rank(deps, query, target, others) >= 2
    for tool in ("recall", "search_memory"):
        got = await call(deps, alice, tool, query=query, limit=3)
        assert got["matches"][0]["id"] == wanted
    prompt = await call(deps, alice, "build_context_prompt", user_prompt=query, limit=1)
    assert target in prompt["prompt"]


async def test_score_stays_the_raw_cosine_when_fusion_reorders(deps, alice):
    ids = await remember_many(deps, alice, [*NAMES, VUKOVIC])
    got = await call(deps, alice, "recall", query="Who is Vukovic?", limit=6, explain=True)
    matches = got["matches"]
    assert matches[0]["id"] == ids[-1]
    scores = [m["score"] for m in matches]
    assert scores != sorted(scores, reverse=True)  # fusion did reorder
    for m in matches:
        assert m["score"] == pytest.approx(
            await cosine(deps, "Who is Vukovic?", m["text"]), abs=2e-3
        )
        assert m["explain"]["cosine"] == pytest.approx(m["score"], abs=1e-4)
    # min_score still filters on that cosine: the best fused match is dropped below it.
    cut = await call(
        deps,
        alice,
        "recall",
        query="Who is Vukovic?",
        limit=6,
        min_score=matches[0]["score"] + 0.01,
    )
    assert ids[-1] not in [m["id"] for m in cut["matches"]]
    assert cut["matches"] and all(m["score"] >= matches[0]["score"] + 0.01 for m in cut["matches"])


async def test_paraphrase_without_shared_words_still_comes_back(deps, alice):
    car = "I bought a new car last week."
    unrelated = [
        "I like green tea.",
        "My sister works as a nurse.",
        "I play tennis on weekends.",
        "My favourite colour is blue.",
        "We adopted a cat named Tom.",
    ]
    ids = await remember_many(deps, alice, [car, *unrelated])
    got = await call(deps, alice, "recall", query="automobile purchase", limit=3, explain=True)
    assert got["matches"][0]["id"] == ids[0]
    assert got["matches"][0]["explain"]["lexical"] == 0.0
    assert got["matches"][0]["explain"]["lexical_rank"] is None
    # With a memory that shares a query word, the paraphrase is still recalled.
    order = await call(
        deps, alice, "remember", text="The purchase order for office chairs is pending."
    )
    got = await call(deps, alice, "recall", query="automobile purchase", limit=3)
    returned = [m["id"] for m in got["matches"]]
    assert ids[0] in returned and order["memory_id"] in returned


async def test_explain_is_off_by_default_and_parts_add_up(deps, alice):
    await remember_many(deps, alice, [*NAMES, VUKOVIC])
    plain = await call(deps, alice, "recall", query="Who is Vukovic?", limit=6)
    assert all("explain" not in m for m in plain["matches"])
    explained = await call(
        deps, alice, "search_memory", query="Who is Vukovic?", limit=6, explain=True
    )
    assert [m["id"] for m in explained["matches"]] == [m["id"] for m in plain["matches"]]
    parts = [m["explain"] for m in explained["matches"]]
    assert set(parts[0]) == {
        "cosine",
        "vector_rank",
        "lexical",
        "lexical_rank",
        "fused",
        "fused_rank",
        "salience",
        "context",
        "time",
        "final",
        "latest_first",
        "hop",
    }
    assert (
        parts[0]["lexical"] == 1.0 and parts[0]["lexical_rank"] == 1 and parts[0]["fused_rank"] == 1
    )
    assert parts[0]["vector_rank"] >= 2
    for p in parts:
        assert p["fused"] == pytest.approx(
            p["cosine"] + ranking.LEXICAL_WEIGHT * p["lexical"], abs=1e-5
        )
        assert p["time"] == 0.0  # the question names no time
        assert p["final"] == pytest.approx(
            p["fused"] + p["time"] + p["salience"] + p["context"], abs=1e-5
        )
    finals = [p["final"] for p in parts]
    assert finals == sorted(finals, reverse=True)
    # Salience shows up as its own contribution.
    await call(deps, alice, "confirm", id=explained["matches"][1]["id"])
    again = await call(deps, alice, "recall", query="Who is Vukovic?", limit=6, explain=True)
    confirmed = next(m for m in again["matches"] if m["id"] == explained["matches"][1]["id"])
    assert confirmed["explain"]["salience"] > 0 and confirmed["explain"]["context"] == 0.0


@pytest.mark.parametrize("tool", ["recall", "search_memory"])
async def test_explain_must_be_a_boolean(deps, alice, tool):
    from .helpers import fails

    await fails(deps, alice, tool, "INVALID_INPUT", query="cats", explain="yes")


# --- filters on lexical-only candidates ---------------------------------------------------


async def _unrelated(deps, memory_ids: list[int], query: str) -> None:
    """Give rows an embedding orthogonal to the query's (cosine 0): far below the fillers."""
    q = np.asarray((await deps.embedder.embed([query]))[0], dtype=np.float64)
    v = np.random.default_rng(7).standard_normal(q.shape)
    v -= (v @ q) / (q @ q) * q
    v /= np.linalg.norm(v)
    text = "[" + ",".join(f"{x:.8f}" for x in v) + "]"
    await sql(
        deps, "UPDATE memories SET embedding = %s::vector WHERE id = ANY(%s)", (text, memory_ids)
    )


async def test_filters_hold_for_lexical_only_candidates(deps, alice, bob):
    query = "quokka sticker album"
    fillers = await remember_many(
        deps,
        alice,
        [
            f"Trip plan {i}: small marsupials on Rottnest Island, photos and souvenirs."
            for i in range(60)
        ],
        tags=["travel"],
    )
    [good] = await remember_many(
        deps, alice, ["Buy the quokka sticker album for Mia."], tags=["travel"]
    )
    [deleted, expired] = await remember_many(
        deps,
        alice,
        ["Old note: quokka sticker album, first edition.", "Expired: quokka sticker album sale."],
        tags=["travel"],
    )
    [wrong_tag] = await remember_many(
        deps, alice, ["Work raffle prize: a quokka sticker album."], tags=["work"]
    )
    [theirs] = await remember_many(
        deps, bob, ["Bob's quokka sticker album is full."], tags=["travel"]
    )
    await call(deps, alice, "forget", id=deleted)
    await expire(deps, expired)
    await _unrelated(deps, [good, deleted, expired, wrong_tag, theirs], query)
    never = {deleted, expired, theirs}

    for args in ({}, {"tags": ["travel"]}, {"limit": 50}, {"tags": ["travel"], "limit": 2}):
        got = await call(deps, alice, "recall", query=query, explain=True, **args)
        returned = {m["id"]: m for m in got["matches"]}
        assert not never & set(returned), args
        if "tags" in args:
            assert wrong_tag not in returned, args
        else:
            assert wrong_tag in returned, args
        assert good in returned, args  # found by its words alone
        assert returned[good]["score"] == pytest.approx(0.0, abs=2e-3)
        assert returned[good]["explain"]["lexical_rank"] == 1
    # The vector side alone would not have found it: more nearer rows than its candidates.
    default = await call(deps, alice, "recall", query=query, explain=True)
    [found] = [m for m in default["matches"] if m["id"] == good]
    assert found["explain"]["vector_rank"] > ranking.candidate_count(8)
    assert len(fillers) > ranking.candidate_count(8)

    tagged_work = await call(deps, alice, "recall", query=query, tags=["work"], limit=50)
    assert [m["id"] for m in tagged_work["matches"]] == [wrong_tag]
    # min_score filters lexical-only candidates on their (computed) cosine as well.
    cut = await call(deps, alice, "recall", query=query, min_score=0.01, limit=50)
    assert good not in {m["id"] for m in cut["matches"]}
    prompt = await call(
        deps, alice, "build_context_prompt", user_prompt=query, limit=3, tags=["travel"]
    )
    assert "Buy the quokka sticker album for Mia." in prompt["prompt"]
    for text in ("first edition", "sale", "raffle", "Bob"):
        assert text not in prompt["prompt"]


# --- term statistics ----------------------------------------------------------------------


async def _stats(deps, user: int) -> tuple[int, dict[str, int]]:
    """The user's totals and term counts; a sealed user's keyed terms named by their lexemes
    where the tests name them (``named_terms``), the rest left as stored."""
    total = await sql(
        deps, "SELECT coalesce(max(docs), 0) FROM memory_term_totals WHERE user_id = %s", (user,)
    )
    terms = await sql(deps, "SELECT term, docs FROM memory_terms WHERE user_id = %s", (user,))
    names = await named_terms(deps, user, _NAMED)
    return int(total[0][0]), {names.get(t, t): int(d) for t, d in terms}


#: The lexemes the statistics tests look up by name.
_NAMED = ("rex", "live", "bergen", "oslo", "sofa", "garden", "rose", "kingfish", "heron")
_NAMED += ("beaver", "otter")


async def _recount(deps, user: int) -> tuple[int, dict[str, int]]:
    total = await sql(
        deps, "SELECT count(*) FROM memories WHERE user_id = %s AND deleted_at IS NULL", (user,)
    )
    terms = await sql(
        deps,
        "SELECT t, count(*) FROM memories, unnest(tsvector_to_array(coalesce(sealed_search, text_search))) AS t"
        " WHERE user_id = %s AND deleted_at IS NULL GROUP BY t",
        (user,),
    )
    names = await named_terms(deps, user, _NAMED)
    return int(total[0][0]), {names.get(t, t): int(d) for t, d in terms}


async def _assert_stats_exact(deps, *users: int) -> None:
    for user in users:
        assert await _stats(deps, user) == await _recount(deps, user)


async def test_term_statistics_follow_every_write(deps, alice, bob):
    ids = await remember_many(
        deps, alice, ["My dog Rex loves the beach.", "Rex is afraid of thunder.", "I live in Oslo."]
    )
    await remember_many(deps, bob, ["Rex is my cat.", "I live in Bergen."])
    await _assert_stats_exact(deps, alice, bob)
    total, terms = await _stats(deps, alice)
    assert total == 3 and terms["rex"] == 2 and terms["live"] == 1 and "bergen" not in terms
    assert (await _stats(deps, bob))[1]["rex"] == 1  # per user

    await call(deps, alice, "update_memory", id=ids[2], text="I moved to Trondheim.")
    await _assert_stats_exact(deps, alice)
    assert "oslo" not in (await _stats(deps, alice))[1]

    await call(deps, alice, "forget", id=ids[1])
    await _assert_stats_exact(deps, alice)
    assert (await _stats(deps, alice))[1]["rex"] == 1

    new = await call(
        deps, alice, "remember", text="Rex now sleeps on the sofa.", supersedes=[ids[0]]
    )
    await _assert_stats_exact(deps, alice)

    await call(deps, alice, "confirm", id=new["memory_id"])
    await call(
        deps, alice, "reinforce", memory_ids=[new["memory_id"]], query="where does Rex sleep"
    )
    await _assert_stats_exact(deps, alice)

    await call(deps, alice, "forget", id=new["memory_id"], hard_delete=True)
    await _assert_stats_exact(deps, alice, bob)
    # Nothing of a hard-deleted memory survives in the statistics.
    assert "sofa" not in (await _stats(deps, alice))[1]


async def test_concurrent_writes_keep_statistics_exact(deps, alice):
    async def batch(n: int) -> None:
        await remember_many(
            deps,
            alice,
            [f"Note {n}-{i}: the garden needs water and the cat needs food." for i in range(20)],
        )

    await asyncio.gather(*(batch(n) for n in range(6)))
    first = await call(deps, alice, "list_memories", limit=5)
    await asyncio.gather(
        *(
            call(deps, alice, "update_memory", id=m["id"], text=m["text"] + " Also the roses.")
            for m in first["memories"]
        ),
        batch(99),
    )
    await _assert_stats_exact(deps, alice)
    total, terms = await _stats(deps, alice)
    assert total == 140 and terms["garden"] == 140 and terms["rose"] == 5


async def test_statistics_follow_savepoints_and_multi_statement_transactions(plain_deps, alice):
    deps = plain_deps  # raw statements on `text`: what a plain row (or the release before) takes
    """A rolled-back savepoint leaves no count behind; several statements fold once at commit."""
    a, b = await remember_many(
        deps, alice, ["The heron stands in the pond.", "Otters swim upstream."]
    )
    async with deps.pool.connection() as conn, conn.transaction():
        await conn.execute("UPDATE memories SET text = 'Kingfishers dive.' WHERE id = %s", (a,))
        with pytest.raises(RuntimeError):
            async with conn.transaction():  # a savepoint
                await conn.execute(
                    "UPDATE memories SET text = 'Beavers build dams.' WHERE id = %s", (b,)
                )
                raise RuntimeError("roll the savepoint back")
        await conn.execute("UPDATE memories SET deleted_at = now() WHERE id = %s", (b,))
        await conn.execute("UPDATE memories SET deleted_at = NULL WHERE id = %s", (b,))
        await conn.execute("UPDATE memories SET salience = 0.5 WHERE id = %s", (b,))
    await _assert_stats_exact(deps, alice)
    terms = (await _stats(deps, alice))[1]
    assert (
        "kingfish" in terms
        and "heron" not in terms
        and "beaver" not in terms
        and terms["otter"] == 1
    )
    assert await sql(deps, "SELECT count(*) FROM memory_term_deltas") == [(0,)]
    assert await sql(deps, "SELECT count(*) FROM memory_term_flush") == [(0,)]


async def test_deleting_a_user_removes_their_statistics(deps, alice, bob):
    await remember_many(deps, alice, ["Alice keeps bees."])
    await remember_many(deps, bob, ["Bob keeps bees too."])
    await sql(deps, "DELETE FROM users WHERE id = %s", (alice,))
    assert await sql(deps, "SELECT count(*) FROM memory_terms WHERE user_id = %s", (alice,)) == [
        (0,)
    ]
    assert await sql(
        deps, "SELECT count(*) FROM memory_term_totals WHERE user_id = %s", (alice,)
    ) == [(0,)]
    await _assert_stats_exact(deps, bob)


@pytest.mark.parametrize(
    "text",
    [
        "O'Neil's backslash \\\\ path C:\\Users\\neil and a:b:c colons",
        "Quotes 'single' \"double\" & ampersand | pipe ! bang (paren) <-> phrase :* prefix",
        "Email neil.o@example.com, url https://example.com/a?b=c#d, version 1.2.3-beta",
        "Ünïcödé wörds, 日本語のテキスト, emoji 🐈 and tabs\tinside",
    ],
)
async def test_any_text_is_a_safe_query(deps, alice, text):
    """Query words go to PostgreSQL as quoted tsquery terms: punctuation is never syntax."""
    stored, _ = await remember_many(deps, alice, [text, "Something else entirely."])
    got = await call(deps, alice, "recall", query=text, limit=2, explain=True)
    assert got["matches"][0]["id"] == stored
    assert got["matches"][0]["explain"]["lexical"] == pytest.approx(1.0)
