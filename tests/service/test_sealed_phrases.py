"""What 0023 left plain, sealed (issue 34, migration 0024): forget reasons, metadata and
relation phrases are in no dump when sealed (the plain control is), answer as plain,
and a sealed value moved to another row does not open."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory.backup import export_store, import_store
from memory.deps import Deps
from memory.relations import extract_relations
from memory.sealing_move import seal_store
from storage.sealing.errors import SealedValueError

from .helpers import call
from .test_recall_graph_hop import ANSWER, ASKED, CROWD, ROLE
from .test_sealed_proofs import _dump


def _marker(kind: str) -> str:
    return kind + "marker" + secrets.token_hex(4)


async def _remember(deps: Deps, user: int, texts: list[str]) -> list[int]:
    """Store ``texts`` and extract their relations (the worker's part, inline)."""
    out = await call(
        deps, user, "remember_batch", items=[{"text": t} for t in texts], dedup_policy="insert"
    )
    ids = [int(r["memory_id"]) for r in out["results"]]
    for memory_id in ids:
        await extract_relations(deps, user, memory_id)
    return ids


async def _forgotten_and_related(deps: Deps, user: int, reason: str, person: str) -> list[int]:
    """A memory forgotten with ``reason``; relations naming ``person`` (rules extractor)."""
    ids = await _remember(
        deps,
        user,
        [
            f"My favourite painter is {person}.",
            f"{person} is my manager. Her husband is Lee.",
            "I keep spare keys with my neighbour.",
        ],
    )
    await call(deps, user, "forget", id=ids[2], reason=reason)
    return ids


def _same(payload: Any, ids: list[int], key: str = "") -> Any:
    """``payload`` with the user's own memory ids (under keys naming an id) replaced by
    their places: two users' answers compared."""
    if isinstance(payload, dict):
        return {k: _same(v, ids, k) for k, v in payload.items()}
    if isinstance(payload, list):
        return [_same(v, ids, key) for v in payload]
    if "id" in key and isinstance(payload, int) and payload in ids:
        return f"id{ids.index(payload)}"
    return payload


async def _answers(deps: Deps, user: int, ids: list[int], person: str) -> list[Any]:
    """What the tools say of the reason and the relations."""
    relations = await call(deps, user, "query_relations", entity=person)
    got = await call(deps, user, "get_memory", id=ids[2])
    conflicts = await call(deps, user, "find_conflicts")
    return [
        _same(relations, ids),
        got["memory"]["forget_reason"],
        _same(conflicts, ids),
    ]


async def test_reasons_and_relation_phrases_are_in_the_dump_when_plain_and_not_when_sealed(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int, clean_db: str
) -> None:
    plain_reason, sealed_reason = _marker("Plainreason"), _marker("Sealedreason")
    plain_person, sealed_person = _marker("Plainperson"), _marker("Sealedperson")
    plain_ids = await _forgotten_and_related(plain_deps, alice, plain_reason, plain_person)
    sealed_ids = await _forgotten_and_related(sealed_deps, bob, sealed_reason, sealed_person)
    dump = _dump(clean_db).lower()
    for marker in (plain_reason, plain_person):
        assert marker.lower().encode() in dump  # the control
    for marker in (sealed_reason, sealed_person):
        assert marker.lower().encode() not in dump
    with psycopg.connect(clean_db) as conn:
        stored = conn.execute(
            "SELECT predicate, subject_sealed IS NOT NULL FROM memory_relations"
            " WHERE user_id = %s ORDER BY id",
            (bob,),
        ).fetchall()
    assert stored and all(sealed for _, sealed in stored)
    assert "manages" not in {p for p, _ in stored}  # the predicate is a keyed hash too
    plain = await _answers(plain_deps, alice, plain_ids, plain_person)
    sealed = await _answers(sealed_deps, bob, sealed_ids, sealed_person)
    assert plain[1] == plain_reason and sealed[1] == sealed_reason
    shown = json.dumps(plain[0]).replace(plain_person, "P")
    assert shown == json.dumps(sealed[0]).replace(sealed_person, "P")
    assert plain[0]["relations"]  # the answer compared is not empty
    assert plain[2] == sealed[2]


async def test_the_graph_hop_ranks_sealed_rows_as_plain_ones(
    plain_deps: Deps, sealed_deps: Deps, alice: int, bob: int
) -> None:
    answers = []
    for deps, user in ((plain_deps, alice), (sealed_deps, bob)):
        await _remember(deps, user, CROWD)
        role, answer = await _remember(deps, user, [ROLE, ANSWER])
        out = await call(deps, user, "recall", query=ASKED, limit=10)
        ranked = [(m["text"], round(m["score"], 6)) for m in out["matches"]]
        assert answer in [m["id"] for m in out["matches"]]  # reached by the hop
        answers.append(ranked)
    assert answers[0] == answers[1]


async def test_a_sealed_reason_or_phrase_moved_to_another_row_does_not_open(
    sealed_deps: Deps, bob: int, clean_db: str
) -> None:
    person = _marker("Movedperson")
    ids = await _forgotten_and_related(sealed_deps, bob, _marker("Movedreason"), person)
    second = await _remember(sealed_deps, bob, ["I used to keep a spare bike at work."])
    await call(sealed_deps, bob, "forget", id=second[0], reason="another reason")
    with psycopg.connect(clean_db) as conn:
        conn.execute(
            "UPDATE memories SET forget_reason_sealed ="
            " (SELECT forget_reason_sealed FROM memories WHERE id = %s) WHERE id = %s",
            (ids[2], second[0]),
        )
        first, other = conn.execute(
            "SELECT id FROM memory_relations WHERE user_id = %s ORDER BY id LIMIT 2", (bob,)
        ).fetchall()
        conn.execute(
            "UPDATE memory_relations SET object_sealed ="
            " (SELECT object_sealed FROM memory_relations WHERE id = %s) WHERE id = %s",
            (first[0], other[0]),
        )
    with pytest.raises(SealedValueError):
        await call(sealed_deps, bob, "get_memory", id=second[0])
    with pytest.raises(SealedValueError):
        await call(sealed_deps, bob, "query_relations", entity=person)


async def test_ownsona_seal_moves_metadata_reasons_and_relations_and_export_opens_them(
    plain_deps: Deps, sealed_deps: Deps, alice: int, clean_db: str, tmp_path: Path
) -> None:
    reason, person, meta = _marker("Movereason"), _marker("Moveperson"), _marker("Movemeta")
    await _forgotten_and_related(plain_deps, alice, reason, person)
    # Metadata comes in through `ownsona import` only (no tool writes it): a backup of
    # alice's store with a marker in one record's metadata, restored as carol's.
    lines: list[str] = []
    await export_store(plain_deps.pool, lines.append, username="alice")
    records = [json.loads(line) for line in "".join(lines).splitlines()]
    records[1]["metadata"] = {"note": meta}
    backup = tmp_path / "alice.jsonl"
    backup.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    await import_store(plain_deps.pool, plain_deps.embedder, backup, into_user="carol")
    dump = _dump(clean_db).lower()
    for marker in (reason, person, meta):
        assert marker.lower().encode() in dump  # the control: written plain
    keyring = sealed_deps.keyring
    assert keyring is not None
    assert await seal_store(sealed_deps.pool, keyring) == 6  # alice's three, carol's three
    assert await seal_store(sealed_deps.pool, keyring) == 0
    dump = _dump(clean_db).lower()
    for marker in (reason, person, meta):
        assert marker.lower().encode() not in dump
    with psycopg.connect(clean_db) as conn:
        plain_edges = conn.execute(
            "SELECT count(*) FROM memory_relations WHERE subject_sealed IS NULL"
        ).fetchone()
    assert plain_edges == (0,)
    relations = await call(sealed_deps, alice, "query_relations", entity=person)
    assert person in {r["object"] for r in relations["relations"]} | {
        r["subject"] for r in relations["relations"]
    }
    exported: list[str] = []
    await export_store(sealed_deps.pool, exported.append, keyring=keyring)
    text = "".join(exported)
    for marker in (reason, person, meta):
        assert marker in text  # the export is the users' own plain JSON
