"""``ownsona seal`` as a process: a progress bar, and a run killed part-way resumes, not restarts."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import signal
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from storage import terms
from storage.migrate import migrate
from storage.sealing.master_key import new_key_text

ROWS = 200
_PROGRESS = re.compile(rb"(\d+)/(\d+)")


def _fresh_database(dsn: str) -> str:
    """A new migrated database on the test server (its own key store beside it)."""
    name = f"seal_cmd_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))  # the CLI takes a URL
    asyncio.run(migrate(url, dimensions=384))
    return url


def _seal(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "scripts.cli", "seal", "--batch", "5"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _plain(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM memories WHERE text_sealed IS NULL").fetchone()
    return int(row[0]) if row else -1


async def _statistics_match_a_recount(url: str, user_id: int) -> bool:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        query = "SELECT term, docs FROM memory_terms WHERE user_id = %s ORDER BY term"
        counted = await (await conn.execute(query, (user_id,))).fetchall()
        await terms.recount(conn, user_id)
        recounted = await (await conn.execute(query, (user_id,))).fetchall()
        await conn.rollback()
    return counted == recounted and len(counted) > 0


def test_a_killed_seal_resumes_where_it_stopped_and_shows_its_progress(dsn: str) -> None:
    url = _fresh_database(dsn)
    with psycopg.connect(url, autocommit=True) as conn:
        user = conn.execute(
            "INSERT INTO users (username, password_hash) VALUES ('sam', 'x') RETURNING id"
        ).fetchone()
        assert user is not None
        conn.execute(
            "INSERT INTO memories (user_id, text, normalized_text, embedding, embedding_provider,"
            " embedding_model, tags) SELECT %s, 'I planted tree number ' || g,"
            " 'i planted tree number ' || g, array_fill(0.05::real, ARRAY[384])::vector,"
            " 'local', 'm', ARRAY['garden'] FROM generate_series(1, %s) g",
            (user[0], ROWS),
        )
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "OWNSONA_MASTER_KEY": new_key_text(),
        "OWNSONA_SEAL_MEMORIES": "true",
    }
    with psycopg.connect(url) as holder:
        # The last plain row held locked: the first run cannot finish, so the kill
        # lands part-way whatever the machine's speed.
        holder.execute(
            "SELECT id FROM memories WHERE user_id = %s ORDER BY id DESC LIMIT 1 FOR UPDATE",
            (user[0],),
        )
        first = _seal(env)
        assert first.stderr is not None
        seen = b""
        while not any(int(m[1]) > 0 for m in _PROGRESS.finditer(seen)):
            chunk = first.stderr.read1(4096)
            assert chunk, seen.decode(errors="replace")
            seen += chunk
        first.send_signal(signal.SIGKILL)
        assert first.wait(30) == -signal.SIGKILL
        first.stderr.close()
        assert first.stdout is not None
        first.stdout.close()
    with psycopg.connect(url) as conn:
        left = _plain(conn)
    assert 0 < left < ROWS
    second = _seal(env)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err.decode(errors="replace")
    totals = {int(m[2]) for m in _PROGRESS.finditer(err)}
    assert totals == {left}  # the bar counts only the rows still plain: no start over
    assert out.decode().strip() == f"sealed {left} memories"
    with psycopg.connect(url) as conn:
        assert _plain(conn) == 0
    assert asyncio.run(_statistics_match_a_recount(url, int(user[0])))
