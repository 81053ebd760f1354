"""Memories sealed at rest (issue 34): nothing readable stored, the same answers as plain."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from memory.deps import Deps
from memory.relations import extract_relations
from storage import memory_reads
from storage.sealing.errors import SealedValueError
from storage.sealing.scope import Scope, sealing_as

from .helpers import call

MARKER = "Zanzibarquux"
FACTS = [
    f"My blood type is AB negative and my doctor is Dr {MARKER}.",
    "I live at 12 Elm Street in Lisbon with my two cats.",
    "My sister Ana works as a nurse in Porto.",
    "I am allergic to penicillin and to peanuts.",
    "My favourite dish is bacalhau with chickpeas.",
    "I run every Sunday morning along the river.",
]
TAGS = [["health", MARKER.lower()], ["home"], ["family"], ["health"], ["food"], ["sport"]]
QUERIES = ["what is my blood type", "where do I live", "allergies", "family nurse", "running"]


async def _store(deps: Deps, user: int) -> list[int]:
    items = [{"text": t, "tags": g} for t, g in zip(FACTS, TAGS, strict=True)]
    out = await call(deps, user, "remember_batch", items=items)
    return [r["memory_id"] for r in out["results"]]


def _ranked(payload: dict[str, Any]) -> list[tuple[str, float]]:
    return [(m["text"], round(m["score"], 6)) for m in payload["matches"]]


async def test_sealed_rows_hold_no_text_and_answer_as_plain_rows(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int, clean_db: str
) -> None:
    await _store(plain_deps, alice)  # plain
    await _store(sealed_deps, bob)  # sealed
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute(
            "SELECT text, normalized_text, tags, text_sealed, text_search::text,"
            " coalesce(sealed_search::text, '') FROM memories WHERE user_id = %s",
            (bob,),
        ).fetchall()
        terms = conn.execute(
            "SELECT string_agg(term, ' ') FROM memory_terms WHERE user_id = %s", (bob,)
        ).fetchone()
    assert rows and terms is not None
    stored = repr(rows) + str(terms[0])
    assert MARKER.lower() not in stored.lower() and "blood" not in stored
    assert all(r[0] == "" and r[3] is not None for r in rows)
    for query in QUERIES:
        plain = await call(plain_deps, alice, "recall", query=query, limit=6)
        sealed = await call(sealed_deps, bob, "recall", query=query, limit=6)
        assert _ranked(sealed) == _ranked(plain), query
    for args in ({"tags": ["health"]}, {"limit": 3}):
        plain_list = await call(plain_deps, alice, "list_memories", **args)
        sealed_list = await call(sealed_deps, bob, "list_memories", **args)
        assert [m["text"] for m in sealed_list["memories"]] == [
            m["text"] for m in plain_list["memories"]
        ]
    plain_tags = await call(plain_deps, alice, "list_tags")
    assert await call(sealed_deps, bob, "list_tags") == plain_tags
    plain_found = await call(plain_deps, alice, "text_search", text="elm STREET")
    found = await call(sealed_deps, bob, "text_search", text="elm STREET")
    assert [m["text"] for m in found["memories"]] == [m["text"] for m in plain_found["memories"]]
    assert [m["text"] for m in found["memories"]] == [FACTS[1]]


async def test_a_sealed_duplicate_is_found_and_an_edit_reseals(
    sealed_deps: Deps, bob: int, clean_db: str
) -> None:
    ids = await _store(sealed_deps, bob)
    again = await call(sealed_deps, bob, "remember", text=FACTS[2])
    assert again["memory_id"] == ids[2] and again["message"] == "Already remembered"
    await call(sealed_deps, bob, "update_memory", id=ids[3], text="I am allergic to shellfish.")
    shown = (await call(sealed_deps, bob, "get_memory", id=ids[3]))["memory"]
    assert shown["text"] == "I am allergic to shellfish."
    hits = await call(sealed_deps, bob, "recall", query="shellfish allergy", limit=1)
    assert hits["matches"][0]["id"] == ids[3]
    with psycopg.connect(clean_db) as conn:
        row = conn.execute("SELECT text, text_sealed FROM memories WHERE id = %s", (ids[3],))
        text, sealed = row.fetchone() or ("?", b"")
    assert text == "" and b"shellfish" not in bytes(sealed)


async def test_a_ciphertext_moved_to_another_row_or_user_does_not_open(
    sealed_deps: Deps, alice: int, bob: int, clean_db: str
) -> None:
    await _store(sealed_deps, alice)
    bob_ids = await _store(sealed_deps, bob)
    with psycopg.connect(clean_db, autocommit=True) as conn:
        # Alice's first text copied over Bob's first row, then over Bob's second.
        conn.execute(
            "UPDATE memories SET text_sealed = (SELECT text_sealed FROM memories"
            " WHERE user_id = %s ORDER BY id LIMIT 1) WHERE id = %s",
            (alice, bob_ids[0]),
        )
        conn.execute(
            "UPDATE memories SET text_sealed = (SELECT text_sealed FROM memories"
            " WHERE id = %s) WHERE id = %s",
            (bob_ids[1], bob_ids[2]),
        )
    keyring = sealed_deps.keyring
    assert keyring is not None
    scope = Scope(await keyring.user_keys(bob), seal_writes=True)
    async with sealed_deps.pool.connection() as conn:
        for memory_id in (bob_ids[0], bob_ids[2]):
            with sealing_as(scope), pytest.raises(SealedValueError, match="does not open"):
                await memory_reads.get_memory(conn, bob, memory_id)
        # With Alice's keys in scope, Bob's rows are refused outright.
        with (
            sealing_as(Scope(await keyring.user_keys(alice), seal_writes=True)),
            pytest.raises(SealedValueError, match="not user"),
        ):
            await memory_reads.get_memory(conn, bob, bob_ids[1])


async def test_recall_opens_the_rows_it_returns_not_every_candidate(
    sealed_deps: Deps, bob: int, clean_db: str
) -> None:
    ids = await _store(sealed_deps, bob)
    for memory_id in ids:  # extracted, as the worker does: recall reads no text to extract
        await extract_relations(sealed_deps, bob, memory_id)
    # The dish's text replaced by the run's (sealed for another row): it no longer opens.
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute(
            "UPDATE memories SET text_sealed = (SELECT text_sealed FROM memories"
            " WHERE id = %s) WHERE id = %s",
            (ids[5], ids[4]),
        )
    # Six rows: every one is a candidate of every recall (at least 40 are read). Ranked
    # below the page, the dish is never opened; on the page, it is refused.
    top = await call(sealed_deps, bob, "recall", query="what is my blood type", limit=1)
    assert [m["id"] for m in top["matches"]] == [ids[0]]
    assert top["matches"][0]["text"] == FACTS[0]
    with pytest.raises(SealedValueError, match="does not open"):
        await call(sealed_deps, bob, "recall", query="what is my blood type", limit=6)


async def _term_counts(dsn: str, user: int) -> tuple[object, ...]:
    with psycopg.connect(dsn) as conn:
        terms = conn.execute(
            "SELECT term, docs FROM memory_terms WHERE user_id = %s ORDER BY term", (user,)
        ).fetchall()
        total = conn.execute(
            "SELECT docs FROM memory_term_totals WHERE user_id = %s", (user,)
        ).fetchone()
    return tuple(terms), total


async def test_ownsona_seal_moves_plain_rows_over_while_writes_continue(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int, clean_db: str
) -> None:
    import asyncio

    from memory.sealing_move import seal_store
    from storage import terms

    meanwhile = [f"Meanwhile fact number {i} about kites." for i in range(4)]
    for user in (alice, bob):  # written plain, before the deployment sealed
        ids = await _store(plain_deps, user)
        await call(plain_deps, user, "forget", id=ids[5])  # a tombstone holds text too
    for text in meanwhile:  # alice: the plain control of bob's final store
        await call(plain_deps, alice, "remember", text=text)
    keyring = sealed_deps.keyring
    assert keyring is not None
    moved: list[int] = []

    async def writes() -> None:
        for text in meanwhile:
            await call(sealed_deps, bob, "remember", text=text)
            await asyncio.sleep(0)

    async def seal_bob() -> int:
        # Alice stays plain: she is the control (seal_store would take every user).
        from storage import sealing_move

        done = 0
        keys = await keyring.user_keys(bob)
        while True:
            async with sealed_deps.pool.connection() as conn, conn.transaction():
                sealed = await sealing_move.seal_batch(conn, keys, limit=1)
            if not sealed:
                return done
            done += sealed
            moved.append(sealed)
            await asyncio.sleep(0)

    sealed, _ = await asyncio.gather(seal_bob(), writes())
    assert sealed == 6 and len(moved) == 6
    with psycopg.connect(clean_db) as conn:
        plain = conn.execute(
            "SELECT count(*) FROM memories WHERE user_id = %s AND text_sealed IS NULL", (bob,)
        ).fetchone()
        rows = conn.execute("SELECT count(*) FROM memories WHERE user_id = %s", (bob,)).fetchone()
    assert plain == (0,) and rows == (10,)
    for query in QUERIES:
        plain_ranked = _ranked(await call(plain_deps, alice, "recall", query=query, limit=6))
        assert _ranked(await call(sealed_deps, bob, "recall", query=query, limit=6)) == (
            plain_ranked
        ), query
    counted = await _term_counts(clean_db, bob)
    async with sealed_deps.pool.connection() as conn, conn.transaction():
        await terms.recount(conn, bob)
    assert await _term_counts(clean_db, bob) == counted  # the statistics moved exactly
    assert await seal_store(sealed_deps.pool, keyring) == 10  # alice's rows: per user
    assert await seal_store(sealed_deps.pool, keyring) == 0


async def test_ownsona_export_opens_every_users_sealed_rows_with_their_keys(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int
) -> None:
    from memory.backup import export_store
    from storage.sealing.errors import SealingError

    await _store(plain_deps, alice)
    await _store(sealed_deps, bob)
    lines: list[str] = []
    summary = await export_store(sealed_deps.pool, lines.append, keyring=sealed_deps.keyring)
    assert summary.memories == 12
    exported = "".join(lines)
    assert all(exported.count(fact) == 2 for fact in FACTS)
    with pytest.raises(SealingError):  # without the keys: refused, never exported as ''
        await export_store(sealed_deps.pool, lines.append)


def _with_metadata_marker(lines: list[str]) -> list[str]:
    """The export's lines with the marker in every memory's metadata and in one edge of
    the memory naming it (the header's relation counts follow)."""
    header, out = json.loads(lines[0]), []
    for line in lines[1:]:
        record = json.loads(line)
        record["metadata"] = {"source_note": f"{MARKER} from the old notes"}
        if not record["relations"] and MARKER in record["text"]:
            edge = {"subject": f"Dr {MARKER}", "predicate": "treats", "object": "user"}
            record["relations"] = [{**edge, "created_at": record["created_at"]}]
            header["relations"] += 1
            header["users"][0]["relations"] += 1
        out.append(json.dumps(record, separators=(",", ":")) + "\n")
    return [json.dumps(header, separators=(",", ":")) + "\n", *out]


def _memory_lines(lines: list[str]) -> list[str]:
    """The export's memory lines (the header carries its own time)."""
    return "".join(lines).splitlines()[1:]


async def test_ownsona_import_writes_sealed_rows_and_round_trips(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int, clean_db: str, tmp_path: Any
) -> None:
    from memory.backup import export_store, import_store

    ids = await _store(sealed_deps, bob)
    # A tombstone travels too, with its reason; so do metadata (only an import writes them).
    await call(sealed_deps, bob, "forget", id=ids[5], reason=f"{MARKER} moved away")
    first: list[str] = []
    await export_store(sealed_deps.pool, first.append, username="bob", keyring=sealed_deps.keyring)
    first = _with_metadata_marker("".join(first).splitlines())
    path = tmp_path / "bob.jsonl"
    path.write_text("".join(first), encoding="utf-8")
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("DELETE FROM memory_relations WHERE user_id = %s", (bob,))
        conn.execute("DELETE FROM memories WHERE user_id = %s", (bob,))

    summary = await import_store(
        sealed_deps.pool, sealed_deps.embedder, path, keyring=sealed_deps.keyring
    )
    assert summary.inserted == 6
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute(
            "SELECT text, tags::text, normalized_text, text_sealed, sealed_search::text"
            " FROM memories WHERE user_id = %s",
            (bob,),
        ).fetchall()
        rows += conn.execute(  # metadata, reasons and edges sealed as the text is
            "SELECT metadata::text, forget_reason, metadata_sealed IS NOT NULL FROM memories"
            " WHERE user_id = %s",
            (bob,),
        ).fetchall()
        edges = conn.execute(
            "SELECT subject, predicate, object, subject_sealed FROM memory_relations"
            " WHERE user_id = %s",
            (bob,),
        ).fetchall()
    assert len(rows) == 12 and all(r[0] == "" and r[3] is not None and r[4] for r in rows[:6])
    assert all(r[0] == "{}" and r[1] is None and r[2] for r in rows[6:])
    assert edges and all(e[3] is not None for e in edges)
    stored = repr(rows).lower() + repr(edges).lower()
    assert MARKER.lower() not in stored and "blood" not in stored
    again: list[str] = []
    await export_store(sealed_deps.pool, again.append, username="bob", keyring=sealed_deps.keyring)
    assert _memory_lines(again) == _memory_lines(first)
    # Re-running finds every row (sealed: by id), and a sealed duplicate by its keyed text.
    rerun = await import_store(
        sealed_deps.pool, sealed_deps.embedder, path, keyring=sealed_deps.keyring
    )
    assert (rerun.inserted, rerun.already_present) == (0, 6)
    # Into another account (alice, holding FACTS[0] sealed): her copy is a duplicate.
    await call(sealed_deps, alice, "remember", text=FACTS[0])
    into = await import_store(
        sealed_deps.pool, sealed_deps.embedder, path, into_user="alice", keyring=sealed_deps.keyring
    )
    assert (into.inserted, into.renumbered, into.duplicates) == (5, 5, 1)
    # Recall over the imported rows answers as over the written ones.
    for query in QUERIES:
        got = _ranked(await call(sealed_deps, bob, "recall", query=query, limit=6))
        assert got and all(text in FACTS for text, _ in got), query


async def test_the_conflict_scans_show_sealed_tags_opened_and_pair_on_them(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int
) -> None:
    """Same store written plain (alice) and sealed (bob): the same groups, tags shown as
    written, never their keyed hashes; the relation conflicts pair on shared tags too."""
    texts = [
        ("Alice lives in Lisbon.", ["home", "city"]),
        ("Alice lives in Porto.", ["home"]),
        ("My favourite colour is dark green, like pine trees.", ["colour"]),
        ("My favourite colour is dark green, like fir trees.", ["colour"]),
    ]

    async def scans(deps: Deps, user: int) -> list[Any]:
        from memory.relations import extract_relations

        ids = []
        for text, tags in texts:
            out = await call(deps, user, "remember", text=text, tags=tags, dedup_policy="insert")
            ids.append(out["memory_id"])
        # The first one's relations stored (its tags read beside its edges), the second
        # still owed (its tags read with its text): the tag gate compares both kinds.
        await extract_relations(deps, user, ids[0])
        out = []
        for tool, args in (
            ("find_conflicts", {"threshold": 0.8}),
            ("find_near_duplicates", {"threshold": 0.8}),
        ):
            payload = await call(deps, user, tool, **args)
            out.append(
                [
                    (g.get("reason"), sorted((m["text"], tuple(m["tags"])) for m in g["memories"]))
                    for g in payload["groups"]
                ]
            )
        return out

    plain = await scans(plain_deps, alice)
    sealed = await scans(sealed_deps, bob)
    assert sealed == plain
    assert any(reason == "relation" for reason, _ in plain[0])  # the control finds the conflict
    shown = {
        tag for groups in sealed for _, members in groups for _, tags in members for tag in tags
    }
    assert shown and shown <= {"home", "city", "colour"}


async def test_a_sealing_update_of_a_plain_row_seals_the_whole_row_first(
    plain_deps: Deps, sealed_deps: Deps, alice: int, clean_db: str
) -> None:
    """A row ``ownsona seal`` has not reached yet, edited by a sealing server: a new
    text must not leave its tags plain (unreadable, and never moved), nor new tags
    sit beside a plain text (which the move would then seal as the tags)."""
    from storage import terms

    ids = await _store(plain_deps, alice)  # written plain, before the deployment sealed
    await call(sealed_deps, alice, "update_memory", id=ids[0], text="My blood type is O positive.")
    await call(sealed_deps, alice, "update_memory", id=ids[1], tags=["address"])
    first = (await call(sealed_deps, alice, "get_memory", id=ids[0]))["memory"]
    second = (await call(sealed_deps, alice, "get_memory", id=ids[1]))["memory"]
    assert (first["text"], first["tags"]) == ("My blood type is O positive.", TAGS[0])
    assert (second["text"], second["tags"]) == (FACTS[1], ["address"])
    with psycopg.connect(clean_db) as conn:
        edited = conn.execute(
            "SELECT text, tags, text_sealed IS NULL, tags_sealed IS NULL FROM memories"
            " WHERE id = ANY(%s)",
            (ids[:2],),
        ).fetchall()
    assert all(r[0] == "" and not r[2] and not r[3] for r in edited), edited
    assert MARKER.lower() not in repr(edited).lower()
    hits = await call(sealed_deps, alice, "recall", query="blood type O positive", limit=1)
    assert hits["matches"][0]["id"] == ids[0]
    counted = await _term_counts(clean_db, alice)
    async with sealed_deps.pool.connection() as conn, conn.transaction():
        await terms.recount(conn, alice)
    assert await _term_counts(clean_db, alice) == counted  # the statistics moved exactly
