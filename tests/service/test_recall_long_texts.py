"""Recall across sessions (issue 28): a long text's word matches count for less.

A chat client stores every turn of both roles. The assistant's long answers
repeat the question's words; the user's short statement of the fact holds fewer
of them, in another conversation. Recall scales the lexical share of a text
longer than ``LENGTH_REFERENCE`` down by its length, so the statement comes
back, and ``explain`` says what each long answer kept of its share.
"""

from __future__ import annotations

import pytest

from memory.rules import lexical_length, ranking

from .helpers import call

ASKED = "What did the doctor say about my knee at the appointment?"
STATEMENT = "The doctor said my knee needs six weeks of physiotherapy."
#: Long answers in one conversation that repeat the question's words.
TOPICS = [
    "running",
    "cycling",
    "swimming",
    "hiking",
    "skiing",
    "tennis",
    "football",
    "yoga",
    "climbing",
    "rowing",
    "dancing",
    "golf",
]
FILLER = (
    "Preparing for a doctor appointment helps you get the most out of it. Write down "
    "your questions, bring a list of medicines, note when the pain started and what "
    "makes it better or worse, and ask what the next steps are. Many people forget "
    "half of what they were told, so taking notes or bringing someone along is wise. "
)
LONG = [
    f"About {t} and your knee: a doctor will usually say at the appointment that rest, ice "
    f"and gentle exercise help, and that {t} should wait until the knee stops hurting. "
    + FILLER
    * 4
    for t in TOPICS
]
OTHERS = [
    "I bought apples and pears at the market.",
    "My sister lives in Lisbon.",
    "I started reading a novel about sailors.",
    "The car needs new tyres before winter.",
    "We painted the kitchen blue last spring.",
    "I prefer tea to coffee in the morning.",
    "My neighbour has two cats.",
    "I am learning to play the cello.",
    "The train to work was late again.",
    "I planted tomatoes on the balcony.",
]
LIMIT = 10


async def _store(deps, user: int, texts: list[str], session: str) -> list[int]:
    items = [{"text": t, "session_id": session} for t in texts]
    out = await call(deps, user, "remember_batch", items=items, dedup_policy="insert")
    return [r["memory_id"] for r in out["results"]]


async def test_a_short_statement_in_another_session_outranks_long_answers(deps, alice):
    answers = await _store(deps, alice, LONG, "chat-advice")
    await _store(deps, alice, OTHERS, "chat-other")
    (statement,) = await _store(deps, alice, [STATEMENT], "chat-knee")

    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT, explain=True)
    ids = [m["id"] for m in out["matches"]]
    assert statement in ids
    why = {m["id"]: m["explain"] for m in out["matches"]}
    assert "lexical_length" not in why[statement]  # a short text keeps its whole share
    scaled = [why[i] for i in ids if i in answers and why[i]["hop"] == "search"]
    assert scaled
    for e in scaled:
        assert 0.0 < e["lexical_length"] < 1.0
        assert e["fused"] == pytest.approx(
            e["cosine"] + ranking.LEXICAL_WEIGHT * e["lexical"], abs=1e-5
        )
    # Unscaled, every long answer the search returned would have come first: the
    # statement owes its place to the length factor.
    unscaled = [
        e["cosine"] + ranking.LEXICAL_WEIGHT * e["lexical"] / e["lexical_length"] for e in scaled
    ]
    assert min(unscaled) > why[statement]["final"]
    assert len(scaled) >= LIMIT - 4  # the statement and the hops' three places aside


async def test_short_texts_keep_their_shares(deps, alice):
    await _store(deps, alice, OTHERS, "chat-other")
    await _store(deps, alice, [STATEMENT], "chat-knee")
    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT, explain=True)
    assert all("lexical_length" not in m["explain"] for m in out["matches"])
    assert all(len(t) <= lexical_length.LENGTH_REFERENCE for t in [*OTHERS, STATEMENT])


async def test_the_session_hop_brings_the_short_reply_not_a_long_one(deps, alice):
    from .test_recall_session_hop import ANSWER, ASKED, CROWD, QUESTION

    essay = (
        "Porto is known for its bakeries, and visitors often ask which one has the best "
        "pastries. The answer depends on what you like: some prefer flaky crusts, some a "
        "creamy custard, some a burnt sugar top. " * 4
    )
    assert len(essay) > lexical_length.LENGTH_REFERENCE
    await call(
        deps, alice, "remember_batch", items=[{"text": t} for t in CROWD], dedup_policy="insert"
    )
    question, long_reply, answer = await _store(deps, alice, [QUESTION, essay, ANSWER], "chat-1")
    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT, explain=True)
    why = {m["id"]: m["explain"] for m in out["matches"]}
    assert question in why and why[question]["hop"] == "search"
    assert why[answer]["hop"] == "session" and why[answer]["hop_from"] in (question, long_reply)
    # The essay is the question's neighbour too, and looks more like it than the answer
    # does: only its own words and meaning can bring it, never the hop.
    assert long_reply not in why or why[long_reply]["hop"] == "search"
