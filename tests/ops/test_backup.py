"""Backup and restore: ``ownsona export`` / ``ownsona import`` lose and change nothing.

The source store is the session database (emptied per test, as every test
does); each restore goes into a database of its own on the same embedded
cluster, created, migrated and dropped here.

These tests compare every stored column of two stores, so they run on plain
stores (``deps`` is ``plain_deps`` here, and the commands are told not to seal):
sealed columns differ between two stores by design (each its own data keys,
fresh nonces). The sealed round trip through the commands compares what a user
gets back, the export file (:func:`test_sealed_rows_round_trip_through_the_commands`);
in process, ``tests/service/test_sealed.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import numpy as np
import psycopg
import pytest

from auth.accounts import authenticate_password, ensure_login_user
from memory.backup import export_store, import_store
from memory.deps import Deps
from memory.errors import MemoryServiceError
from memory.providers.embedders import OpenAIEmbedder
from memory.relations import extract_relations
from storage.migrate import migrate
from storage.pool import make_pool
from tests.conftest import SESSION_MASTER_KEY, TEST_DIMENSIONS
from tests.providers.test_openai_embedder import FakeProvider, serve_provider
from tests.tool_calls import USE_CASES

REPO = Path(__file__).resolve().parents[2]


# --- fixtures -------------------------------------------------------------------


@pytest.fixture
def deps(plain_deps: Deps) -> Deps:
    """Plain rows, whatever OWNSONA_TEST_SEALED says: these tests compare raw columns."""
    return plain_deps


@pytest.fixture
def target_dsn(dsn: str) -> Iterator[str]:
    """An empty database beside the session one (``target`` migrates it); dropped afterwards."""
    name = f"ownsona_restore_{os.getpid()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    # The same URL with another database (DATABASE_URL must be a URL).
    yield urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
async def target(target_dsn: str, embedder, settings) -> AsyncIterator[Deps]:
    """The restore database, migrated, with its own pool and the local model."""
    await migrate(target_dsn, dimensions=TEST_DIMENSIONS)
    pool = make_pool(target_dsn, min_size=1, max_size=3, name="restore-target")
    await pool.open(wait=True)
    try:
        yield Deps(settings=settings, pool=pool, embedder=embedder)
    finally:
        await pool.close()


@pytest.fixture
def other_model() -> Iterator[tuple[FakeProvider, str]]:
    """An OpenAI-compatible embeddings server (another model, same width)."""
    fake = FakeProvider()
    fake.dims = TEST_DIMENSIONS
    with serve_provider(fake) as base_url:
        yield fake, base_url


# --- building a store with every kind of row ----------------------------------------


async def call(deps: Deps, user: int, tool: str, **args: Any) -> dict[str, Any]:
    payload = await USE_CASES[tool](deps, user, args)
    assert payload["ok"], payload
    return payload


async def sql(deps: Deps, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    async with deps.pool.connection() as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall() if cur.description else []


async def user_id(deps: Deps, name: str) -> int:
    rows = await sql(deps, "SELECT id FROM users WHERE username = %s", (name,))
    if rows:
        return int(rows[0][0])
    rows = await sql(
        deps, "INSERT INTO users (username, password_hash) VALUES (%s, 'x') RETURNING id", (name,)
    )
    return int(rows[0][0])


ALICE_FACTS = [
    "My sister Ana lives in Lisbon.",
    "I drink green tea every morning before work.",
    "My dentist is Dr. Okafor on Elm Street.",
    "Colby works as an architect in Denver.",
    "The wifi password hint is the name of our first cat.",
]


async def build_store(deps: Deps) -> dict[str, int]:
    """Two accounts; active, forgotten, superseded, expired and expiring rows; tags,
    learned salience, use counts and contexts; relation edges; metadata; unicode."""
    alice, bob = await user_id(deps, "alice"), await user_id(deps, "bob")
    out = await call(
        deps,
        alice,
        "remember_batch",
        items=[
            {"text": ALICE_FACTS[0], "tags": ["family", "Places"], "importance": 0.9, "keep": True},
            {
                "text": ALICE_FACTS[1],
                "tags": ["habits"],
                "source_provider": "claude",
                "capture_mode": "explicit",
            },
            {
                "text": ALICE_FACTS[2],
                "tags": ["health"],
                "session_id": "s-42",
                "capture_mode": "inferred",
                # Event time (issue 17), to the microsecond.
                "occurred_at": "2025-11-03T10:00:00.5+01:00",
                "valid_from": "2025-11-01T00:00:00Z",
                "valid_to": "2027-01-01T00:00:00Z",
            },
            {"text": ALICE_FACTS[3], "expires_at": "2099-01-01T00:00:00.250000Z"},
            {"text": ALICE_FACTS[4], "last_confirmed_at": "2026-01-02T03:04:05Z"},
        ],
        dedup_policy="insert",
    )
    ids = [r["memory_id"] for r in out["results"]]
    ids_by_name = {
        "sister": ids[0],
        "tea": ids[1],
        "dentist": ids[2],
        "colby": ids[3],
        "wifi": ids[4],
    }
    old_job = await call(
        deps, alice, "remember", text="I work as a nurse at the city hospital.", tags=["work"]
    )
    new_job = await call(
        deps,
        alice,
        "remember",
        text="I work as a pharmacist now, since March.",
        supersedes=[old_job["memory_id"]],
    )
    ids_by_name["old_job"], ids_by_name["new_job"] = old_job["memory_id"], new_job["memory_id"]
    gone = await call(
        deps, alice, "remember", text="My locker code at the gym is on a sticky note.", tags=["gym"]
    )
    await call(deps, alice, "forget", id=gone["memory_id"], reason="moved gyms")
    ids_by_name["forgotten"] = gone["memory_id"]
    expired = await call(
        deps, alice, "remember", text="The plumber comes on Thursday at nine. Über früh!"
    )
    await sql(
        deps,
        "UPDATE memories SET expires_at = now() - interval '1 day' WHERE id = %s",
        (expired["memory_id"],),
    )
    ids_by_name["expired"] = expired["memory_id"]
    # An occurred_at read from the text (a later new text is read again): the flag is kept.
    await sql(
        deps,
        "UPDATE memories SET occurred_at = '2024-04-01T00:00:00Z', occurred_at_parsed = true"
        " WHERE id = %s",
        (ids[3],),
    )
    # Feedback: salience, use counts and a learned context centroid.
    await call(
        deps,
        alice,
        "reinforce",
        memory_ids=[ids[0], ids[1]],
        delta=0.7,
        query="where does my sister live",
    )
    await call(deps, alice, "reinforce", memory_ids=[ids[0]], delta=0.4, query="family in Portugal")
    await call(deps, alice, "reinforce", memory_ids=[ids[2]], delta=-0.5)
    # No tool writes metadata; an older or newer version may have.
    await sql(
        deps,
        """UPDATE memories SET metadata = '{"origin": "import", "n": [1, 2.5], "ü": null}' WHERE id = %s""",
        (ids[1],),
    )
    for mid in (ids[0], ids[3], new_job["memory_id"]):
        await extract_relations(deps, alice, mid)
    bob_out = await call(
        deps,
        bob,
        "remember_batch",
        items=[
            {"text": ALICE_FACTS[1], "tags": ["habits"]},
            {"text": "My brother Omar lives in Oslo."},
        ],
        dedup_policy="insert",
    )
    ids_by_name["bob_tea"], ids_by_name["bob_brother"] = (
        r["memory_id"] for r in bob_out["results"]
    )
    await extract_relations(deps, bob, ids_by_name["bob_brother"])
    return ids_by_name


# --- what "nothing changed" means ----------------------------------------------------------


async def rows_of(deps: Deps) -> dict[int, dict[str, Any]]:
    """Every column of every memory but the vectors we recompute, users by name."""
    async with deps.pool.connection() as conn:
        cur = conn.cursor(row_factory=psycopg.rows.dict_row)
        await cur.execute(
            "SELECT m.*, u.username FROM memories m JOIN users u ON u.id = m.user_id ORDER BY m.id"
        )
        rows = await cur.fetchall()
        cur = conn.cursor(row_factory=psycopg.rows.dict_row)
        await cur.execute(
            "SELECT r.memory_id, r.subject, r.predicate, r.object, r.created_at, u.username"
            " FROM memory_relations r JOIN users u ON u.id = r.user_id ORDER BY memory_id, r.id"
        )
        edges = await cur.fetchall()
    out = {}
    for row in rows:
        row.pop("embedding")
        row.pop("user_id")
        centroid = row["context_centroid"]
        row["context_centroid"] = None if centroid is None else centroid.to_numpy().tolist()
        row["relations"] = [
            (e["subject"], e["predicate"], e["object"], e["created_at"], e["username"])
            for e in edges
            if e["memory_id"] == row["id"]
        ]
        out[row["id"]] = row
    return out


async def term_statistics(deps: Deps) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    totals = await sql(
        deps,
        "SELECT u.username, t.docs FROM memory_term_totals t JOIN users u ON u.id = t.user_id ORDER BY 1",
    )
    terms = await sql(
        deps,
        "SELECT u.username, t.term, t.docs FROM memory_terms t JOIN users u ON u.id = t.user_id ORDER BY 1, 2",
    )
    return totals, terms


def ownsona(
    dsn: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real ``ownsona`` command, on the given database, writing plain rows."""
    plain = {"OWNSONA_SEAL_MEMORIES": "0"}
    environment = {**os.environ, "DATABASE_URL": dsn, **plain, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "scripts.cli", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


# --- the round trip ----------------------------------------------------------------------


async def test_sealed_rows_round_trip_through_the_commands(sealed_deps, target_dsn, dsn, tmp_path):
    """`ownsona export` opens sealed rows, `ownsona import` seals them again in another
    store (its own key store beside it), and that store exports the same file."""
    await build_store(sealed_deps)
    assert await sql(sealed_deps, "SELECT count(*) FROM memories WHERE text_sealed IS NULL") == [
        (0,)
    ]
    sealed = {"OWNSONA_SEAL_MEMORIES": "1", "OWNSONA_MASTER_KEY": SESSION_MASTER_KEY}
    first, second = tmp_path / "backup.jsonl", tmp_path / "again.jsonl"
    done = await asyncio.to_thread(
        ownsona, dsn, "export", "--all-users", "--output", str(first), env=sealed
    )
    assert done.returncode == 0, done.stderr
    done = await asyncio.to_thread(ownsona, target_dsn, "migrate", env=sealed)
    assert done.returncode == 0, done.stderr
    done = await asyncio.to_thread(ownsona, target_dsn, "import", str(first), env=sealed)
    assert done.returncode == 0, done.stderr
    assert "imported 11 memories (0 under new ids)" in done.stdout
    async with await psycopg.AsyncConnection.connect(target_dsn) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE text_sealed IS NULL), count(*) FROM memories"
        )
        assert await cur.fetchone() == (0, 11)  # stored sealed, every one
    done = await asyncio.to_thread(
        ownsona, target_dsn, "export", "--all-users", "--output", str(second), env=sealed
    )
    assert done.returncode == 0, done.stderr
    one, two = lines_of(first), lines_of(second)
    one[0].pop("exported_at"), two[0].pop("exported_at")
    assert len(one) == 12 and one == two


async def test_round_trip_through_the_commands_loses_and_changes_nothing(
    deps, target, target_dsn, dsn, tmp_path
):
    ids = await build_store(deps)
    before = await rows_of(deps)
    stats_before = await term_statistics(deps)
    assert len(before) == 11 and any(r["relations"] for r in before.values())
    assert (
        before[ids["sister"]]["context_centroid"] is not None
        and before[ids["sister"]]["context_count"] == 2
    )

    first = tmp_path / "backup.jsonl"
    exported = done = await asyncio.to_thread(
        ownsona, dsn, "export", "--all-users", "--output", str(first)
    )
    assert done.returncode == 0, done.stderr
    assert "exported 11 memories" in done.stderr
    header, *records = lines_of(first)
    assert header["format"] == "ownsona-export" and header["version"] == 2
    assert header["memories"] == 11
    assert [(u["username"], u["memories"]) for u in header["users"]] == [("alice", 9), ("bob", 2)]
    assert "embedding" not in records[0] and all(r["user"] in ("alice", "bob") for r in records)

    imported = done = await asyncio.to_thread(
        ownsona, target_dsn, "import", str(first), "--batch-size", "4"
    )
    assert done.returncode == 0, done.stderr
    assert "imported 11 memories (0 under new ids)" in done.stdout
    assert "created accounts without a password: alice, bob" in done.stdout
    assert "OWNSONA_LOGIN_PASSWORD" in done.stdout
    # The bar went to stderr with a rate and an ETA.
    assert "11/11" in done.stderr and "memories/s" in done.stderr

    after = await rows_of(target)
    assert after == before  # every column, ids, users, relations, centroids included
    dentist, colby = after[ids["dentist"]], after[ids["colby"]]
    assert dentist["occurred_at"].isoformat() == "2025-11-03T09:00:00.500000+00:00"
    assert dentist["valid_to"].isoformat() == "2027-01-01T00:00:00+00:00"
    assert colby["occurred_at_parsed"] is True
    assert await term_statistics(target) == stats_before

    # Exporting the restored store gives the same file, but for the moment it was taken.
    second = tmp_path / "again.jsonl"
    with second.open("w", encoding="utf-8") as out:
        await export_store(target.pool, out.write)
    one, two = lines_of(first), lines_of(second)
    one[0].pop("exported_at"), two[0].pop("exported_at")
    assert one == two

    # The vectors were computed again, from the texts, by the active model.
    texts = {mid: row["text"] for mid, row in after.items()}
    stored = await sql(target, "SELECT id, embedding FROM memories ORDER BY id")
    fresh = await target.embedder.embed([texts[r[0]] for r in stored])
    for (mid, vector), expected in zip(stored, fresh, strict=False):
        assert np.allclose(vector.to_numpy(), expected, atol=1e-6), mid
    alice = await user_id(target, "alice")
    found = await call(target, alice, "recall", query="where does my sister live?")
    assert found["matches"][0]["id"] == ids["sister"]
    found = await call(target, alice, "query_relations", entity="Ana")
    assert found["ok"]

    # The restored accounts have no usable password yet.
    hashes = await sql(target, "SELECT password_hash FROM users ORDER BY username")
    assert hashes == [("!",), ("!",)]

    # Re-running the import inserts nothing and changes nothing.
    done = await asyncio.to_thread(ownsona, target_dsn, "import", str(first))
    assert done.returncode == 0, done.stderr
    assert "imported 0 memories" in done.stdout and "skipped 11 already present" in done.stdout
    assert await rows_of(target) == before
    # What the commands printed and logged names no memory.
    for output in (done.stdout, done.stderr, exported.stderr, imported.stdout, imported.stderr):
        assert not any(row["text"] in output for row in before.values())


async def test_one_account_goes_into_another_and_other_models_lose_learned_contexts(
    deps, target, other_model, tmp_path
):
    ids = await build_store(deps)
    before = await rows_of(deps)
    path = tmp_path / "alice.jsonl"
    with path.open("w", encoding="utf-8") as out:
        summary = await export_store(deps.pool, out.write, username="alice")
    assert summary.memories == 9 and summary.users == 1
    fake, base_url = other_model
    embedder = OpenAIEmbedder(
        base_url=base_url,
        model="other-embedder",
        dimensions=TEST_DIMENSIONS,
        client=httpx.AsyncClient(),
        owns_client=True,
    )
    try:
        result = await import_store(target.pool, embedder, path, into_user="carol", batch_size=3)
    finally:
        await embedder.aclose()
    assert result.inserted == 9 and result.users_created == ["carol"]
    assert result.centroids_cleared == 2  # the two reinforced with a query
    assert sum(len(r.body["input"]) for r in fake.requests) == 9  # one call per batch of three
    after = await rows_of(target)
    for mid, row in after.items():
        original = before[mid]
        assert row["username"] == "carol"
        assert (row["embedding_provider"], row["embedding_model"]) == ("openai", "other-embedder")
        assert row["context_centroid"] is None and row["context_count"] == 0
        assert row["salience"] == original["salience"] and row["use_count"] == original["use_count"]
        for key in (
            "text",
            "tags",
            "created_at",
            "updated_at",
            "deleted_at",
            "replaced_by_id",
            "relations",
        ):
            if key == "relations":
                assert [e[:4] for e in row[key]] == [e[:4] for e in original[key]]
            else:
                assert row[key] == original[key], key
    assert ids["bob_tea"] not in after

    # carol was created without a password; the login settings give her one.
    assert await authenticate_password(target.pool, "carol", "anything-at-all") is None
    login = target.settings.with_overrides(
        login_username="carol", login_password="carol-password-1"
    )
    account = await ensure_login_user(target.pool, login)
    assert account is not None and account.password_updated
    assert await authenticate_password(target.pool, "carol", "carol-password-1") == await user_id(
        target, "carol"
    )


async def test_a_malformed_line_is_refused_with_its_number_and_nothing_is_written(
    deps, target, target_dsn, tmp_path
):
    await build_store(deps)
    good = tmp_path / "good.jsonl"
    with good.open("w", encoding="utf-8") as out:
        await export_store(deps.pool, out.write)
    lines = good.read_text("utf-8").splitlines()

    def variant(name: str, index: int, replacement: str | None) -> Path:
        changed = list(lines)
        if replacement is None:
            del changed[index]
        else:
            changed[index] = replacement
        path = tmp_path / name
        path.write_text("\n".join(changed) + "\n", "utf-8")
        return path

    record = json.loads(lines[5])
    cases = {
        "json": (variant("json.jsonl", 5, lines[5][:-10]), 6, "not valid JSON"),
        "tags": (
            variant("tags.jsonl", 7, json.dumps({**json.loads(lines[7]), "tags": "family"})),
            8,
            "tags",
        ),
        "time": (
            variant(
                "time.jsonl", 3, json.dumps({**json.loads(lines[3]), "created_at": "yesterday"})
            ),
            4,
            "created_at",
        ),
        "dup": (
            variant("dup.jsonl", 9, json.dumps({**json.loads(lines[9]), "id": record["id"]})),
            10,
            "appears twice",
        ),
        "header": (
            variant("header.jsonl", 0, '{"format": "something-else"}'),
            1,
            "not an OwnSona export",
        ),
    }
    for name, (path, line_no, words) in cases.items():
        with pytest.raises(MemoryServiceError) as caught:
            await import_store(target.pool, target.embedder, path)
        assert caught.value.code == "INVALID_INPUT", name
        assert (
            caught.value.message.startswith(f"line {line_no}: ") and words in caught.value.message
        ), (
            name,
            caught.value.message,
        )
        assert record["text"] not in caught.value.message
    # A truncated file (its last line lost) is caught by the header's counts.
    with pytest.raises(MemoryServiceError) as caught:
        await import_store(target.pool, target.embedder, variant("cut.jsonl", len(lines) - 1, None))
    assert "truncated" in caught.value.message
    assert await sql(target, "SELECT count(*) FROM memories") == [(0,)]
    assert await sql(target, "SELECT count(*) FROM users") == [(0,)]

    # Through the command: the line number and a non-zero status, nothing on stdout.
    done = await asyncio.to_thread(ownsona, target_dsn, "import", str(cases["tags"][0]))
    assert done.returncode == 2 and "line 8: tags" in done.stderr and not done.stdout
    assert await sql(target, "SELECT count(*) FROM memories") == [(0,)]


async def test_a_version_1_backup_restores_with_no_event_time(deps, target, tmp_path):
    ids = await build_store(deps)
    before = await rows_of(deps)
    current = tmp_path / "v2.jsonl"
    with current.open("w", encoding="utf-8") as out:
        await export_store(deps.pool, out.write)
    # What OwnSona wrote before issue 17: version 1, records without the event-time fields.
    added = ("occurred_at", "valid_from", "valid_to", "occurred_at_parsed")
    header, *records = lines_of(current)
    old = tmp_path / "v1.jsonl"
    old.write_text(
        "\n".join(
            json.dumps(line)
            for line in [
                {**header, "version": 1},
                *({k: v for k, v in r.items() if k not in added} for r in records),
            ]
        )
        + "\n",
        "utf-8",
    )
    summary = await import_store(target.pool, target.embedder, old)
    assert summary.inserted == len(before)
    after = await rows_of(target)
    for row in before.values():
        row.update(occurred_at=None, valid_from=None, valid_to=None, occurred_at_parsed=False)
    assert after == before
    assert after[ids["dentist"]]["occurred_at"] is None

    # A version 1 record that names a later version's field is refused, naming the line.
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        "\n".join(json.dumps(line) for line in [{**header, "version": 1}, *records]) + "\n",
        "utf-8",
    )
    with pytest.raises(MemoryServiceError) as caught:
        await import_store(target.pool, target.embedder, mixed)
    assert caught.value.message.startswith("line 2: unknown fields")
    # A version this OwnSona does not know is refused before anything is read.
    newer = tmp_path / "v3.jsonl"
    newer.write_text(
        "\n".join(json.dumps(line) for line in [{**header, "version": 3}, *records]) + "\n",
        "utf-8",
    )
    with pytest.raises(MemoryServiceError) as caught:
        await import_store(target.pool, target.embedder, newer)
    assert "version 3 is not supported" in caught.value.message


async def test_import_into_a_store_in_use_keeps_its_rows_and_renumbers_clashing_ids(
    deps, target, tmp_path
):
    ids = await build_store(deps)
    before = await rows_of(deps)
    path = tmp_path / "backup.jsonl"
    with path.open("w", encoding="utf-8") as out:
        await export_store(deps.pool, out.write)

    # The target already serves: alice and dave have rows there holding ids 1..9, one
    # of them the same fact as one in the backup.
    alice = await user_id(target, "alice")
    dave = await user_id(target, "dave")
    own = await call(
        target,
        alice,
        "remember_batch",
        items=[{"text": ALICE_FACTS[1]}, {"text": "I keep my passport in the desk drawer."}],
        dedup_policy="insert",
    )
    daves = await call(
        target,
        dave,
        "remember_batch",
        items=[{"text": f"Dave's bike number {n} is blue."} for n in range(7)],
        dedup_policy="insert",
    )
    existing = await rows_of(target)
    assert sorted(existing) == list(range(1, 10))

    result = await import_store(target.pool, target.embedder, path, batch_size=4)
    assert result.duplicates == 1  # alice already holds the green-tea fact as an active row
    assert result.inserted == 10 and result.renumbered == 8  # ids 1..9 minus the duplicate
    assert result.users_created == ["bob"]
    after = await rows_of(target)
    for mid, row in existing.items():
        assert after[mid] == row  # the store's own rows are untouched
    restored = {mid: row for mid, row in after.items() if mid not in existing}
    assert len(restored) == 10
    # Every backed-up memory but the duplicate is there, field for field, wherever it landed.
    by_birth = {(r["username"], r["created_at"], r["text"]): r for r in restored.values()}
    moved: dict[int, int] = {}
    for mid, original in before.items():
        if mid == ids["tea"]:
            continue
        row = by_birth[(original["username"], original["created_at"], original["text"])]
        moved[mid] = row["id"]
    for mid, original in before.items():
        if mid == ids["tea"]:
            continue
        row = restored[moved[mid]]
        expected = {**original, "id": moved[mid]}
        if original["replaced_by_id"] is not None:
            expected["replaced_by_id"] = moved[original["replaced_by_id"]]
        assert row == expected, mid
    # The superseded job still points at its successor, which got a new id.
    assert moved[ids["new_job"]] != ids["new_job"]
    assert restored[moved[ids["old_job"]]]["replaced_by_id"] == moved[ids["new_job"]]

    again = await import_store(target.pool, target.embedder, path)
    assert again.inserted == 0 and again.already_present == 10 and again.duplicates == 1
    assert await rows_of(target) == after
    assert own["summary"]["succeeded"] == 2 and daves["summary"]["succeeded"] == 7


class _Interrupted(Exception):
    pass


class _StopAfter:
    """A progress sink that interrupts the import after ``batches`` committed batches."""

    def __init__(self, batches: int) -> None:
        self.left = batches

    def start(self, total: int) -> None:
        pass

    def advance(self, count: int) -> None:
        self.left -= 1
        if self.left == 0:
            raise _Interrupted


async def test_an_interrupted_import_keeps_whole_batches_and_a_rerun_finishes_it(
    deps, target, tmp_path
):
    await build_store(deps)
    before = await rows_of(deps)
    path = tmp_path / "backup.jsonl"
    with path.open("w", encoding="utf-8") as out:
        await export_store(deps.pool, out.write)

    with pytest.raises(_Interrupted):
        await import_store(target.pool, target.embedder, path, batch_size=3, progress=_StopAfter(2))
    assert sorted(await rows_of(target)) == sorted(before)[:6]  # two whole batches of three

    result = await import_store(target.pool, target.embedder, path, batch_size=3)
    assert (result.inserted, result.already_present) == (5, 6)
    assert await rows_of(target) == before
    assert await term_statistics(target) == await term_statistics(deps)
