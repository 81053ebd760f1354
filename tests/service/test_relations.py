"""The relation graph: extraction after writes, query_relations, and what deletes and expiry do."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bootstrap.providers import make_extractor
from memory.graph import Relation
from memory.providers.extractors import RulesExtractor
from memory.relations import extract_relations
from storage import outbox

from .helpers import call, expire, fails, fingerprint, sql
from .helpers import stored_edges as edges_of


class Recorder:
    """The ``on_text_stored`` hook, recording instead of enqueueing."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, list[int]]] = []

    def __call__(self, user_id: int, memory_ids: list[int]) -> None:
        self.calls.append((user_id, list(memory_ids)))

    def drain(self) -> list[tuple[int, int]]:
        out = [(u, m) for u, ids in self.calls for m in ids]
        self.calls.clear()
        return out


@pytest.fixture
def deps(deps):
    """The shared deps with the extractor a composition root passes (``RELATION_EXTRACTOR=rules``)."""
    return dataclasses.replace(deps, extractor=make_extractor(deps.settings))


@pytest.fixture
def hooked(deps):
    recorder = Recorder()
    return dataclasses.replace(deps, on_text_stored=recorder), recorder


async def settle(deps, recorder: Recorder) -> None:
    """Run the extraction jobs the writes asked for (the worker's part, inline)."""
    for user_id, memory_id in recorder.drain():
        await extract_relations(deps, user_id, memory_id)


async def remember(deps, recorder, user: int, text: str, **args: Any) -> int:
    out = await call(deps, user, "remember", text=text, **args)
    await settle(deps, recorder)
    return int(out["memory_id"])


def edges(out: dict[str, Any]) -> list[tuple[str, str, str, int, str]]:
    return [
        (r["subject"], r["predicate"], r["object"], r["source_memory_id"], r["source_text"])
        for r in out["relations"]
    ]


async def stored_edges(deps, memory_id: int) -> list[tuple[str, str, str]]:
    return await edges_of(deps, [memory_id])  # opened if sealed


async def test_the_multi_hop_example(hooked, alice):
    deps, rec = hooked
    m1 = await remember(deps, rec, alice, "Dana is my manager.")
    m2 = await remember(deps, rec, alice, "Dana's husband is Lee.")
    out = await call(deps, alice, "query_relations", entity="my manager", max_hops=2)
    assert out["entity"] == "my manager"
    assert edges(out) == [
        ("Dana", "manages", "the user", m1, "Dana is my manager."),
        ("Lee", "husband of", "Dana", m2, "Dana's husband is Lee."),
    ]
    assert out["summary"] == {"count": 2}
    await call(deps, alice, "forget", id=m2)
    out = await call(deps, alice, "query_relations", entity="my manager", max_hops=2)
    assert edges(out) == [("Dana", "manages", "the user", m1, "Dana is my manager.")]


async def test_default_hops_is_two_and_one_hop_is_direct(hooked, alice):
    deps, rec = hooked
    await remember(deps, rec, alice, "Dana is my manager.")
    await remember(deps, rec, alice, "Dana's husband is Lee.")
    await remember(deps, rec, alice, "Lee works at the City Hospital.")
    one = await call(deps, alice, "query_relations", entity="Dana", max_hops=1)
    assert [e[:3] for e in edges(one)] == [
        ("Dana", "manages", "the user"),
        ("Lee", "husband of", "Dana"),
    ]
    two = await call(deps, alice, "query_relations", entity="Dana")
    assert ("Lee", "works at", "the City Hospital") in [e[:3] for e in edges(two)]
    five = await call(deps, alice, "query_relations", entity="Dana", max_hops=50)  # capped at 5
    assert edges(five) == edges(two)


async def test_entities_match_case_insensitively_and_first_person_resolves(hooked, alice):
    deps, rec = hooked
    m = await remember(deps, rec, alice, "My sister Ana lives in Porto.")
    for entity in ("ANA", "ana", "  Ana "):
        out = await call(deps, alice, "query_relations", entity=entity, max_hops=1)
        assert {e[:3] for e in edges(out)} == {
            ("Ana", "sister of", "the user"),
            ("Ana", "lives in", "Porto"),
        }
    me = await call(deps, alice, "query_relations", entity="me", max_hops=1)
    assert edges(me) == [("Ana", "sister of", "the user", m, "My sister Ana lives in Porto.")]
    sister = await call(deps, alice, "query_relations", entity="my sister", max_hops=1)
    assert {e[:3] for e in edges(sister)} == {
        ("Ana", "sister of", "the user"),
        ("Ana", "lives in", "Porto"),
    }


async def test_each_edge_carries_its_source_memorys_current_text(hooked, alice):
    deps, rec = hooked
    m = await remember(deps, rec, alice, "Dana is my manager.")
    # A change that keeps the facts: the text shown is the current one.
    await call(deps, alice, "update_memory", id=m, text="Dana is my manager!")
    await settle(deps, rec)
    out = await call(deps, alice, "query_relations", entity="Dana")
    assert edges(out) == [("Dana", "manages", "the user", m, "Dana is my manager!")]


async def test_changed_text_replaces_the_edges(hooked, alice):
    deps, rec = hooked
    m = await remember(deps, rec, alice, "I live in Berlin.")
    assert await stored_edges(deps, m) == [("the user", "lives in", "Berlin")]
    await call(deps, alice, "update_memory", id=m, text="I live in Munich and work at Siemens.")
    assert rec.calls == [(alice, [m])]
    await settle(deps, rec)
    assert await stored_edges(deps, m) == [
        ("the user", "lives in", "Munich"),
        ("the user", "works at", "Siemens"),
    ]


async def test_only_text_changes_ask_for_extraction(hooked, alice):
    deps, rec = hooked
    m = await remember(deps, rec, alice, "I live in Berlin.")
    await call(deps, alice, "update_memory", id=m, tags=["places"])
    await call(deps, alice, "update_memory", id=m, text="I live in Rome.", dry_run=True)
    await call(deps, alice, "confirm", id=m)
    await call(deps, alice, "remember", text="I live in Berlin.")  # already remembered
    assert rec.calls == []
    out = await call(
        deps,
        alice,
        "update_memory_batch",
        items=[
            {"id": m, "text": "I live in Paris."},
            {"id": 99_999, "text": "x"},
            {"id": m, "importance": 0.9},
        ],
    )
    assert out["summary"]["updated"] == 2
    assert rec.calls == [(alice, [m])]


async def test_batches_ask_once_for_every_new_memory(hooked, alice):
    deps, rec = hooked
    out = await call(
        deps,
        alice,
        "remember_batch",
        items=[
            {"text": "I love sushi."},
            {"text": "I love sushi."},
            {"text": "Tom is my brother."},
        ],
    )
    ids = [r["memory_id"] for r in out["results"]]
    assert rec.calls == [(alice, sorted({ids[0], ids[2]}))]


async def test_hard_delete_removes_the_edges(hooked, alice):
    deps, rec = hooked
    m = await remember(deps, rec, alice, "Dana is my manager.")
    assert await stored_edges(deps, m)
    await call(deps, alice, "forget", id=m, hard_delete=True)
    assert (await sql(deps, "SELECT count(*) FROM memory_relations"))[0][0] == 0


async def test_soft_deleted_and_expired_sources_are_skipped(hooked, alice):
    deps, rec = hooked
    a = await remember(deps, rec, alice, "Dana is my manager.")
    b = await remember(deps, rec, alice, "Dana lives in Oslo.")
    await expire(deps, b)
    out = await call(deps, alice, "query_relations", entity="Dana")
    assert [e[3] for e in edges(out)] == [a]
    await call(deps, alice, "forget", id=a)
    assert (await call(deps, alice, "query_relations", entity="Dana"))["relations"] == []


async def test_superseded_memories_leave_the_graph(hooked, alice):
    deps, rec = hooked
    old = await remember(deps, rec, alice, "I live in Berlin.")
    new = await remember(deps, rec, alice, "I live in Munich.", supersedes=[old])
    out = await call(deps, alice, "query_relations", entity="me", max_hops=1)
    assert [e[:4] for e in edges(out)] == [("the user", "lives in", "Munich", new)]


async def test_relations_are_scoped_to_the_memorys_user(hooked, alice, bob):
    deps, rec = hooked
    m = await remember(deps, rec, alice, "Dana is my manager.")
    await remember(deps, rec, bob, "Dana is my sister.")
    bobs = await call(deps, bob, "query_relations", entity="Dana")
    assert [e[:3] for e in edges(bobs)] == [("Dana", "sister of", "the user")]
    rows = await sql(deps, "SELECT user_id FROM memory_relations WHERE memory_id = %s", (m,))
    assert rows == [(alice,)]
    # Bob's job for Alice's memory finds nothing of his and writes nothing.
    assert await extract_relations(deps, bob, m) is None
    assert len(await stored_edges(deps, m)) == 1


async def test_results_are_capped_at_graph_max_relations(hooked, alice):
    deps, rec = hooked
    small = dataclasses.replace(deps, settings=deps.settings.with_overrides(graph_max_relations=3))
    for food in ("sushi", "ramen", "tacos", "curry", "pho"):
        await remember(deps, rec, alice, f"I love {food}.")
    out = await call(small, alice, "query_relations", entity="me")
    assert [e[2] for e in edges(out)] == ["sushi", "ramen", "tacos"]
    assert out["summary"] == {"count": 3, "truncated": True}


async def test_nothing_found_is_an_empty_answer(deps, alice):
    out = await call(deps, alice, "query_relations", entity="Zed")
    assert out == {"ok": True, "entity": "Zed", "relations": [], "summary": {"count": 0}}


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"entity": ""},
        {"entity": "   "},
        {"entity": 5},
        {"entity": "x" * 501},
        {"entity": "Dana", "max_hops": 0},
        {"entity": "Dana", "max_hops": -1},
        {"entity": "Dana", "max_hops": 1.5},
        {"entity": "Dana", "max_hops": "2"},
    ],
)
async def test_bad_input(deps, alice, args):
    await fails(deps, alice, "query_relations", "INVALID_INPUT", **args)


# --- the extraction job's service function ----------------------------------------------------


async def test_extraction_never_touches_the_memory(hooked, alice):
    deps, rec = hooked
    await call(deps, alice, "remember", text="Dana is my manager.", tags=["work"])
    before = await fingerprint(deps, alice)
    await settle(deps, rec)
    assert await fingerprint(deps, alice) == before


async def test_rerunning_extraction_is_idempotent(hooked, alice):
    deps, _ = hooked
    m = (await call(deps, alice, "remember", text="My son Colby lives in Los Angeles."))[
        "memory_id"
    ]
    assert await extract_relations(deps, alice, m) == 2
    # A second job for the same memory is owed nothing: it extracts nothing.
    assert await extract_relations(deps, alice, m) is None
    # Owed again (as `ownsona relations rebuild` makes it), it replaces the edges: no duplicates.
    async with deps.pool.connection() as conn:
        await outbox.owe_all(conn, alice, hold_s=0)
    assert await extract_relations(deps, alice, m) == 2
    assert await stored_edges(deps, m) == [
        ("Colby", "son of", "the user"),
        ("Colby", "lives in", "Los Angeles"),
    ]


async def test_gone_or_forgotten_memories_are_not_extracted(deps, alice):
    assert await extract_relations(deps, alice, 424242) is None
    m = (await call(deps, alice, "remember", text="Dana is my manager."))["memory_id"]
    await call(deps, alice, "forget", id=m)
    assert await extract_relations(deps, alice, m) is None
    assert await stored_edges(deps, m) == []


async def test_text_changed_during_extraction_is_left_to_the_newer_job(deps, alice):
    m = (await call(deps, alice, "remember", text="I live in Berlin."))["memory_id"]

    class Racing:
        """An extractor during whose run the memory is edited (a slow LLM, say)."""

        name = "racing"

        async def extract(self, text: str) -> list[Relation]:
            await call(deps, alice, "update_memory", id=m, text="I live in Rome.")
            return await RulesExtractor().extract(text)

    assert await extract_relations(deps, alice, m, extractor=Racing()) is None
    assert await stored_edges(deps, m) == []
    assert await extract_relations(deps, alice, m) == 1
    assert await stored_edges(deps, m) == [("the user", "lives in", "Rome")]


async def test_off_removes_stale_edges(hooked, alice):
    deps, rec = hooked
    m = await remember(deps, rec, alice, "I live in Berlin.")
    # A process with RELATION_EXTRACTOR=off: its composition root passes no extractor.
    off_settings = deps.settings.with_overrides(relation_extractor="off")
    off = dataclasses.replace(deps, settings=off_settings, extractor=make_extractor(off_settings))
    assert off.extractor is None
    await call(off, alice, "update_memory", id=m, text="I moved away from Berlin.")
    for user_id, memory_id in rec.drain():
        assert await extract_relations(off, user_id, memory_id) == 0
    assert await stored_edges(deps, m) == []


async def test_a_failing_hook_does_not_fail_the_write(deps, alice, caplog):
    def broken(user_id: int, memory_ids: list[int]) -> None:
        raise ConnectionError("queue down")

    failing = dataclasses.replace(deps, on_text_stored=broken)
    out = await call(failing, alice, "remember", text="I live in Berlin.")
    assert out["ok"] and out["message"] == "Ok"
    assert (await sql(deps, "SELECT count(*) FROM memories"))[0][0] == 1
    assert "could not enqueue relation extraction" in caplog.text
