"""Recall's session hop: memories stored next to a best match in its session (issue 17).

In a conversation the answer is the turn after the question, and it rarely looks
like what the user later asks. After the first ranking, recall reads the
memories stored just before and after its top matches in their session and puts
the best of them after its first seven matches, marked in ``explain``.
"""

from __future__ import annotations

import dataclasses

from memory.recall.hops import HOP_KEEP, HOP_MIN_COSINE

from .helpers import call, cosine

QUESTION = "Which bakery in Porto had the best pastries?"
ANSWER = "Definitely Manteigaria, their pastel de nata was amazing."
ASKED = "Which bakery in Porto did I like best?"
#: About Porto, bakeries and pastries, so each looks more like the question than ANSWER.
CROWD = [
    "Porto has a lot of bakeries near the river.",
    "I bought bread at a bakery in Porto on Saturday.",
    "The bakery on my street in Porto opens at seven.",
    "I ate too many pastries in Porto last year.",
    "My favourite bakery in Lisbon sells rye bread.",
    "Porto's best bakeries are busy on Sundays.",
    "A bakery in Porto sells croissants with ham.",
    "I want to learn to bake pastries like the ones in Porto.",
    "The hotel in Porto served pastries for breakfast.",
    "There is a famous bakery chain in Porto.",
    "I tried a bakery in Porto that sells vegan pastries.",
    "The pastries at the Porto airport bakery were stale.",
]
LIMIT = 10


async def _store(deps, user: int, texts: list[str], session: str | None = None) -> list[int]:
    items = [{"text": t, **({"session_id": session} if session else {})} for t in texts]
    out = await call(deps, user, "remember_batch", items=items, dedup_policy="insert")
    return [r["memory_id"] for r in out["results"]]


def _hop_off(deps):
    return dataclasses.replace(
        deps, settings=dataclasses.replace(deps.settings, recall_session_hop=False)
    )


def _ids(out) -> list[int]:
    return [m["id"] for m in out["matches"]]


async def test_the_answer_stored_after_a_matching_question_is_recalled(deps, alice):
    await _store(deps, alice, CROWD)
    question, answer, thanks = await _store(
        deps, alice, [QUESTION, ANSWER, "Thanks, I will go there tomorrow."], session="chat-1"
    )
    assert await cosine(deps, ASKED, ANSWER) >= HOP_MIN_COSINE
    plain = await call(_hop_off(deps), alice, "recall", query=ASKED, limit=LIMIT)
    assert question in _ids(plain)[:3] and answer not in _ids(plain)

    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT, explain=True)
    ids = _ids(out)
    assert len(ids) == LIMIT
    assert ids[:HOP_KEEP] == _ids(plain)[:HOP_KEEP]  # the first ranking's best stay first
    assert answer in ids[HOP_KEEP:]
    match = next(m for m in out["matches"] if m["id"] == answer)
    assert match["explain"]["hop"] == "session"
    assert match["explain"]["hop_from"] == question
    assert match["score"] == round(await cosine(deps, ASKED, ANSWER), 4)
    first = next(m for m in out["matches"] if m["id"] == question)
    assert first["explain"]["hop"] == "search"
    assert thanks not in ids or thanks in ids[HOP_KEEP:]


async def test_no_hop_across_sessions_nor_to_forgotten_memories(deps, alice):
    await _store(deps, alice, CROWD)
    (question,) = await _store(deps, alice, [QUESTION], session="chat-1")
    (elsewhere,) = await _store(deps, alice, [ANSWER], session="chat-2")
    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT)
    assert question in _ids(out) and elsewhere not in _ids(out)

    # Other words: a text stored twice is the same memory (exact duplicates are not stored).
    question2, answer2 = await _store(
        deps,
        alice,
        [
            "Which bakery in Porto did we think had the best pastries?",
            "Manteigaria for sure, the pastel de nata there was amazing.",
        ],
        session="chat-3",
    )
    assert answer2 in _ids(await call(deps, alice, "recall", query=ASKED, limit=LIMIT))
    await call(deps, alice, "forget", id=answer2)
    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT)
    assert answer2 not in _ids(out)


async def test_another_users_memories_in_a_session_of_the_same_name_stay_theirs(deps, alice, bob):
    await _store(deps, alice, CROWD)
    (question,) = await _store(deps, alice, [QUESTION], session="chat-1")
    (theirs,) = await _store(deps, bob, [ANSWER], session="chat-1")  # stored right after
    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT)
    assert question in _ids(out) and theirs not in _ids(out)


async def test_a_recall_of_few_matches_is_left_as_the_first_ranking_made_it(deps, alice):
    await _store(deps, alice, CROWD)
    await _store(deps, alice, [QUESTION, ANSWER], session="chat-1")
    for limit in (1, HOP_KEEP):
        plain = await call(_hop_off(deps), alice, "recall", query=ASKED, limit=limit)
        out = await call(deps, alice, "recall", query=ASKED, limit=limit)
        assert _ids(out) == _ids(plain)


async def test_build_context_prompt_gets_the_answer_too(deps, alice):
    await _store(deps, alice, CROWD)
    await _store(deps, alice, [QUESTION, ANSWER], session="chat-1")
    out = await call(deps, alice, "build_context_prompt", user_prompt=ASKED, limit=LIMIT)
    assert ANSWER in out["prompt"]


#: An assistant's long answer (over 500 characters): about the bakery, like ANSWER, but a
#: document rather than the reply next to the question.
LONG_ANSWER = (
    "Manteigaria is the one most people remember: their pastel de nata comes out of the oven "
    "every half hour, the custard is barely set and the pastry shatters. Fabrica da Nata is "
    "close by and a little cheaper, with a bigger room to sit down in. Confeitaria do Bolhao "
    "has been open since 1896 and is worth it for the building alone, with its tiled walls "
    "and long counter. If you want something other than custard tarts, try a bola de "
    "Berlim, a fried dough filled with egg cream, or a slice of pao de lo. Most of these "
    "places open around eight and sell out of the best things by the early afternoon."
)


async def test_no_hop_to_a_long_neighbour(deps, alice):
    # Issue 28: with every turn of both roles stored, the hop had filled places 8-10 with
    # the assistant's long answers next to a match; the short reply still comes.
    assert len(LONG_ANSWER) > 500
    await _store(deps, alice, CROWD)
    question, long_answer, answer = await _store(
        deps, alice, [QUESTION, LONG_ANSWER, ANSWER], session="chat-1"
    )
    assert await cosine(deps, ASKED, LONG_ANSWER) >= HOP_MIN_COSINE  # only its length bars it
    plain = await call(_hop_off(deps), alice, "recall", query=ASKED, limit=LIMIT)
    assert long_answer not in _ids(plain)

    ids = _ids(await call(deps, alice, "recall", query=ASKED, limit=LIMIT))
    assert answer in ids[HOP_KEEP:]
    assert long_answer not in ids
