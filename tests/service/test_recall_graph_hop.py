"""Recall's graph hop: the memories about someone a best match names (issue 17).

"Where does my manager live?" finds "My manager is Ana Silva." but not "Ana
Silva lives in Porto.": it does not name the manager, and other facts look more
like the question. After the first ranking, recall follows the people and things
its top matches' relations name to the memories whose relations name them too,
and puts the best of them after its first seven matches, marked in ``explain``.
"""

from __future__ import annotations

import dataclasses

import pytest

from bootstrap.providers import make_extractor
from memory.recall.hops import HOP_KEEP
from memory.relations import extract_relations

from .helpers import call, cosine, sql

ASKED = "Where does my manager live?"
ROLE = "My manager is Ana Silva."
ANSWER = "Ana Silva lives in Porto."
#: Each looks more like the question than ANSWER ("boss" is near "manager"), and names
#: nobody ANSWER names.
CROWD = [
    f"{name}'s boss lives in {city}."
    for name, city in [
        ("Ben Novak", "Lyon"),
        ("Chloe Tanaka", "Oslo"),
        ("Dmitri Larsen", "Riga"),
        ("Elena Moreau", "Quito"),
        ("Farid Haddad", "Accra"),
        ("Grace Okafor", "Hanoi"),
        ("Hiro Kim", "Seoul"),
        ("Ines Costa", "Lima"),
        ("Jonas Berg", "Bergen"),
        ("Kavya Rao", "Krakow"),
        ("Liam Byrne", "Tallinn"),
        ("Maya Cohen", "Denver"),
    ]
]
LIMIT = 10


@pytest.fixture
def deps(deps):
    """The shared deps with the rules extractor (``RELATION_EXTRACTOR=rules``)."""
    return dataclasses.replace(deps, extractor=make_extractor(deps.settings))


async def _store(deps, user: int, texts: list[str], **item: object) -> list[int]:
    """Store ``texts`` and extract their relations (the worker's part, inline)."""
    out = await call(
        deps, user, "remember_batch", items=[{"text": t, **item} for t in texts],
        dedup_policy="insert",
    )  # fmt: skip
    ids = [int(r["memory_id"]) for r in out["results"]]
    for memory_id in ids:
        await extract_relations(deps, user, memory_id)
    return ids


def _off(deps, **settings: object):
    return dataclasses.replace(deps, settings=dataclasses.replace(deps.settings, **settings))


def _ids(out) -> list[int]:
    return [m["id"] for m in out["matches"]]


async def test_the_fact_about_the_person_a_match_names_is_recalled(deps, alice):
    await _store(deps, alice, CROWD)
    role, answer = await _store(deps, alice, [ROLE, ANSWER])
    plain = await call(
        _off(deps, recall_graph_hop=False), alice, "recall", query=ASKED, limit=LIMIT
    )
    assert role in _ids(plain)[:3] and answer not in _ids(plain)

    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT, explain=True)
    ids = _ids(out)
    assert len(ids) == LIMIT
    assert ids[:HOP_KEEP] == _ids(plain)[:HOP_KEEP]  # the first ranking's best stay first
    assert answer in ids[HOP_KEEP:]
    match = next(m for m in out["matches"] if m["id"] == answer)
    assert match["explain"] == {
        "cosine": pytest.approx(await cosine(deps, ASKED, ANSWER), abs=1e-5),
        "hop": "graph",
        "hop_from": role,
    }
    assert match["score"] == round(await cosine(deps, ASKED, ANSWER), 4)

    prompt = await call(deps, alice, "build_context_prompt", user_prompt=ASKED, limit=LIMIT)
    assert ANSWER in prompt["prompt"]


async def test_nothing_is_followed_without_relations_or_room(deps, alice):
    await _store(deps, alice, CROWD)
    _role, answer = await _store(deps, alice, [ROLE, ANSWER])
    for off in (
        _off(deps, recall_graph_hop=False),
        _off(deps, relation_extractor="off"),  # no graph to follow
    ):
        assert answer not in _ids(await call(off, alice, "recall", query=ASKED, limit=LIMIT))
    for limit in (1, HOP_KEEP):
        plain = await call(
            _off(deps, recall_graph_hop=False), alice, "recall", query=ASKED, limit=limit
        )
        assert _ids(await call(deps, alice, "recall", query=ASKED, limit=limit)) == _ids(plain)


async def test_the_user_is_not_followed(deps, alice):
    """Nearly every first-person fact names the user: following them would bring any of them."""
    await _store(deps, alice, CROWD)
    (role,) = await _store(deps, alice, [ROLE])
    mine = await _store(
        deps, alice, ["I live in Porto.", "I have lived in Lisbon since 2019.", "I moved to Braga."]
    )
    assert await sql(
        deps, "SELECT count(*) FROM memory_relations WHERE memory_id = ANY(%s)", (mine,)
    ) == [(3,)]
    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT, explain=True)
    assert role in _ids(out)
    assert not [m for m in out["matches"] if m["explain"]["hop"] == "graph" and m["id"] in mine]


async def test_no_hop_to_forgotten_untagged_or_another_users_memories(deps, alice, bob):
    await _store(deps, alice, CROWD, tags=["people"])
    (role,) = await _store(deps, alice, [ROLE], tags=["people"])
    (theirs,) = await _store(deps, bob, ["Ana Silva lives in Faro."])
    (untagged,) = await _store(deps, alice, ["Ana Silva lives in Braga."])
    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT, tags=["people"])
    assert role in _ids(out) and untagged not in _ids(out) and theirs not in _ids(out)
    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT)
    assert untagged in _ids(out) and theirs not in _ids(out)

    (answer,) = await _store(deps, alice, [ANSWER])
    assert answer in _ids(await call(deps, alice, "recall", query=ASKED, limit=LIMIT))
    await call(deps, alice, "forget", id=answer)
    assert answer not in _ids(await call(deps, alice, "recall", query=ASKED, limit=LIMIT))


async def test_an_out_of_date_fact_about_them_gives_way_to_the_fresher_one(deps, alice):
    await _store(deps, alice, CROWD)
    role, porto = await _store(deps, alice, [ROLE, ANSWER])
    (lisbon,) = await _store(deps, alice, ["Ana Silva lives in Lisbon now."], downweights=[porto])
    out = _ids(await call(deps, alice, "recall", query=ASKED, limit=LIMIT))
    assert role in out and lisbon in out[HOP_KEEP:] and porto not in out

    # Without a downweight, the relations say the same: one home, the fresher one.
    await call(deps, alice, "forget", id=lisbon)
    (braga,) = await _store(deps, alice, ["Ana Silva moved to Braga."])
    out = _ids(await call(deps, alice, "recall", query=ASKED, limit=LIMIT))
    assert braga in out[HOP_KEEP:] and porto not in out


async def test_the_session_and_graph_hops_take_turns(deps, alice):
    await _store(deps, alice, CROWD)
    chat = await _store(
        deps,
        alice,
        [
            "I want to post a birthday card to my manager.",
            ROLE,
            "I still need her home address for it.",
            "Her office is by the river, she walks there.",
        ],
        session_id="chat-1",
    )
    role = chat[1]
    (answer,) = await _store(deps, alice, [ANSWER])
    out = await call(deps, alice, "recall", query=ASKED, limit=LIMIT, explain=True)
    matches = out["matches"]
    assert matches[0]["id"] == role
    hopped = [(m["id"], m["explain"]["hop"]) for m in matches if m["explain"]["hop"] != "search"]
    assert [m["id"] for m in matches[HOP_KEEP:]] == [i for i, _ in hopped]  # after the first 7
    assert [kind for _, kind in hopped] == ["session", "graph", "session"]
    assert hopped[1][0] == answer and {hopped[0][0], hopped[2][0]} <= set(chat) - {role}
    assert len(set(_ids(out))) == LIMIT
