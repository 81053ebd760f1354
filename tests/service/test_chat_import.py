"""Importing ChatGPT and Claude conversations: facts or messages, with provenance, once."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from memory.call_keys import call_scope
from memory.chat_import import ChatImportError, import_chats
from memory.deps import Deps
from memory.providers.fact_extractor import LLMFactExtractor
from memory.rules.chat_exports import parse_export
from scripts.chat_import_commands import direct_store
from tests.opened_rows import memory_texts
from tests.service.helpers import opened_rows

FIXTURES = Path(__file__).parents[1] / "fixtures" / "chat_exports"
CHATGPT = parse_export((FIXTURES / "chatgpt_conversations.json").read_bytes())
CLAUDE = parse_export((FIXTURES / "claude_conversations.json").read_bytes())
LISBON_ID = "6f1c2a4e-0b7d-4c1e-9a52-3d7e8f1b2c01"
BREAD_ID = "9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c02"

#: What the local LLM answers, by the conversation title found in the prompt.
FACTS = {
    "Moving to Lisbon": [
        "The user is moving to Lisbon in April 2024 with their partner Sam.",
        "The user's daughter Mia is seven years old and loves swimming.",
    ],
    "Sourdough help": ["The user is allergic to sesame."],
}


class FactServer:
    """``POST /v1/chat/completions`` answering ``{"facts": [...]}`` for the conversation asked."""

    def __init__(self, facts: dict[str, list[Any]]) -> None:
        self.facts = facts
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                server.requests.append({"path": self.path, "body": body})
                prompt = body["messages"][1]["content"]
                found = next((f for t, f in server.facts.items() if t in prompt), [])
                answer = {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": json.dumps({"facts": found}),
                            },
                            "finish_reason": "stop",
                        }
                    ],
                }
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def prompts(self) -> list[str]:
        return [r["body"]["messages"][1]["content"] for r in self.requests]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def llm() -> Iterator[FactServer]:
    server = FactServer(FACTS)
    yield server
    server.close()


def fact_extractor(llm: FactServer) -> LLMFactExtractor:
    return LLMFactExtractor(base_url=llm.url, model="test-model", client=httpx.AsyncClient)


_STORED = (
    "SELECT id, user_id, text, source_provider, session_id, capture_mode, tags,"
    " last_confirmed_at, text_sealed, tags_sealed"
    " FROM memories WHERE user_id = %s AND deleted_at IS NULL ORDER BY id"
)
_STORED_FIELDS = ("text", "source_provider", "session_id", "capture_mode", "tags")


def stored_as_kept(dsn: str, user_id: int) -> list[tuple[Any, ...]]:
    """The user's active rows as the table keeps them (a sealed row's text is '')."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(_STORED, (user_id,)).fetchall()
    return [(*r[2:7], r[7]) for r in rows]


async def stored(deps: Deps, user_id: int) -> list[tuple[Any, ...]]:
    """The user's active rows, a sealed row's text and tags opened (as the tools read them)."""
    rows = await opened_rows(deps, _STORED, (user_id,))
    return [(*(r[f] for f in _STORED_FIELDS), r["last_confirmed_at"]) for r in rows]


async def test_extract_mode_stores_the_facts_the_llm_finds_with_their_provenance(
    deps: Deps, alice: int, clean_db: str, llm: FactServer
) -> None:
    report = await import_chats(
        deps.pool,
        alice,
        CHATGPT,
        mode="extract",
        store_batch=direct_store(deps, alice, None),
        extractor=fact_extractor(llm),
    )
    assert (report.conversations, report.messages, report.stored, report.skipped) == (2, 5, 3, 0)
    rows = await stored(deps, alice)
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (FACTS["Moving to Lisbon"][0], "chatgpt-import", LISBON_ID, "inferred"),
        (FACTS["Moving to Lisbon"][1], "chatgpt-import", LISBON_ID, "inferred"),
        (FACTS["Sourdough help"][0], "chatgpt-import", BREAD_ID, "inferred"),
    ]
    assert all(r[4] == ["imported"] for r in rows)
    lisbon, bread = llm.prompts()
    # The conversation's date, so "next month" can become a month; the user's words only.
    assert "Conversation date: 2024-03-05" in lisbon
    assert "Conversation date: 2024-06-10" in bread
    assert "Our daughter Mia is seven" in lisbon
    assert "Campo de Ourique" not in lisbon and "An abandoned branch" not in lisbon
    assert llm.requests[0]["path"] == "/v1/chat/completions"


async def test_messages_mode_stores_the_users_own_messages_tagged_imported(
    deps: Deps, alice: int, clean_db: str
) -> None:
    report = await import_chats(
        deps.pool, alice, CLAUDE, mode="messages", store_batch=direct_store(deps, alice, None)
    )
    assert (report.conversations, report.messages, report.stored) == (2, 3, 2)
    rows = await stored(deps, alice)
    assert [r[0] for r in rows] == [
        "I'm training for the Berlin marathon on 29 September; I currently run 40 km a week.",
        "My brother Tom collects vinyl records of 70s jazz.",
    ]  # never the assistant's answers, never "ok"
    assert {(r[1], r[3]) for r in rows} == {("claude-import", "explicit")}
    assert [r[2] for r in rows] == [
        "1b2c3d4e-5f60-4718-9a2b-3c4d5e6f7a81",
        "2c3d4e5f-6071-4829-8b3c-4d5e6f7a8b92",
    ]
    assert all(r[4] == ["imported"] for r in rows)
    assert rows[0][5].isoformat() == "2024-09-01T07:15:01+00:00"


async def test_messages_are_cut_to_the_longest_text_a_memory_holds(
    deps: Deps, alice: int, clean_db: str
) -> None:
    await import_chats(
        deps.pool,
        alice,
        CLAUDE,
        mode="messages",
        store_batch=direct_store(deps, alice, None),
        max_text_chars=20,
    )
    assert [r[0] for r in await stored(deps, alice)] == [
        "I'm training for the",
        "My brother Tom colle",
    ]


async def test_importing_again_stores_nothing_twice(
    deps: Deps, alice: int, clean_db: str, llm: FactServer
) -> None:
    store = direct_store(deps, alice, None)
    scope = await call_scope(deps, alice)  # as the command and the console pass it
    keys = scope.keys if scope is not None else None
    await import_chats(deps.pool, alice, CLAUDE, mode="messages", store_batch=store, keys=keys)
    first = await stored(deps, alice)
    rows = await opened_rows(deps, _STORED, (alice,))
    brother = [r["id"] for r in rows if r["text"].startswith("My brother")]
    assert len(brother) == 1
    with psycopg.connect(clean_db, autocommit=True) as conn:  # forgotten since: stays forgotten
        conn.execute("UPDATE memories SET deleted_at = now() WHERE id = ANY(%s)", (brother,))
    again = await import_chats(
        deps.pool, alice, CLAUDE, mode="messages", store_batch=store, keys=keys
    )
    assert (again.stored, again.skipped) == (0, 2)
    assert await stored(deps, alice) == first[:1]

    extractor = fact_extractor(llm)
    await import_chats(
        deps.pool, alice, CHATGPT, mode="extract", store_batch=store, extractor=extractor, keys=keys
    )
    asked = len(llm.requests)
    repeat = await import_chats(
        deps.pool, alice, CHATGPT, mode="extract", store_batch=store, extractor=extractor, keys=keys
    )
    assert (repeat.stored, repeat.skipped) == (0, 3)
    assert len(llm.requests) == asked  # a conversation already extracted is not sent again
    assert len(await stored(deps, alice)) == 4


async def test_a_conversation_stored_in_part_is_extracted_again_and_completed(
    deps: Deps, alice: int, clean_db: str, llm: FactServer
) -> None:
    store = direct_store(deps, alice, None)
    calls = 0

    async def fails_on_the_second_batch(items: list[dict[str, Any]], key: str) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 2:  # what the write queue answers when the database went away midway
            return {"ok": False, "error": {"code": "DATABASE_ERROR", "message": "Down."}}
        return await store(items, key)

    extractor = fact_extractor(llm)
    with pytest.raises(ChatImportError, match="1 memories were stored before it"):
        await import_chats(
            deps.pool,
            alice,
            CHATGPT,
            mode="extract",
            store_batch=fails_on_the_second_batch,
            extractor=extractor,
            max_batch=1,
        )
    assert [r[0] for r in await stored(deps, alice)] == FACTS["Moving to Lisbon"][:1]

    again = await import_chats(
        deps.pool, alice, CHATGPT, mode="extract", store_batch=store, extractor=extractor
    )
    assert (again.stored, again.skipped) == (2, 1)
    assert sorted(r[0] for r in await stored(deps, alice)) == sorted(
        FACTS["Moving to Lisbon"] + FACTS["Sourdough help"]
    )
    asked = len(llm.requests)
    third = await import_chats(
        deps.pool, alice, CHATGPT, mode="extract", store_batch=store, extractor=extractor
    )
    assert (third.stored, third.skipped) == (0, 3)
    assert len(llm.requests) == asked  # both finished now: neither is sent again


async def test_extract_mode_without_an_extractor_refuses_and_stores_nothing(
    deps: Deps, alice: int, clean_db: str
) -> None:
    with pytest.raises(ChatImportError, match="LLM_BASE_URL and LLM_MODEL") as refused:
        await import_chats(
            deps.pool, alice, CHATGPT, mode="extract", store_batch=direct_store(deps, alice, None)
        )
    assert "messages mode" in refused.value.public_message
    assert await stored(deps, alice) == []


async def test_an_unreachable_llm_is_reported_and_nothing_is_stored(
    deps: Deps, alice: int, clean_db: str
) -> None:
    down = LLMFactExtractor(base_url="http://127.0.0.1:9/v1", model="m", client=httpx.AsyncClient)
    report = await import_chats(
        deps.pool,
        alice,
        CHATGPT,
        mode="extract",
        store_batch=direct_store(deps, alice, None),
        extractor=down,
    )
    assert (report.failed_conversations, report.stored) == (2, 0)
    assert "import again to retry" in report.describe()
    assert await stored(deps, alice) == []


# --- ownsona import-chat ------------------------------------------------------------------


def ownsona(*args: str) -> int:
    from scripts.cli import main

    return main(list(args))


@pytest.fixture
def command_env(monkeypatch: pytest.MonkeyPatch, clean_db: str) -> pytest.MonkeyPatch:
    monkeypatch.setenv("DATABASE_URL", clean_db)
    for name in ("LLM_BASE_URL", "LLM_MODEL", "LLM_API_KEY", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_the_command_without_an_extractor_says_so_and_stores_nothing(
    command_env: pytest.MonkeyPatch, alice: int, clean_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = ownsona("import-chat", str(FIXTURES / "chatgpt_conversations.json"), "--user", "alice")
    out, err = capsys.readouterr()
    assert status == 2
    assert "found a ChatGPT export: 2 conversations, 10 messages (5 of them yours)" in out
    assert "2024-03-05 to 2024-06-11" in out
    assert "LLM_BASE_URL and LLM_MODEL" in err and "--messages" in err
    assert stored_as_kept(clean_db, alice) == []

    claude = str(FIXTURES / "claude_conversations.json")
    status = ownsona("import-chat", claude, "--user", "alice", "--messages")
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "2 memories stored" in out
    assert {r[1] for r in stored_as_kept(clean_db, alice)} == {"claude-import"}


def test_the_command_extracts_facts_once_and_records_its_writes(
    command_env: pytest.MonkeyPatch,
    alice: int,
    clean_db: str,
    llm: FactServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    command_env.setenv("LLM_BASE_URL", llm.url)
    command_env.setenv("LLM_MODEL", "test-model")
    export = str(FIXTURES / "chatgpt_conversations.json")
    assert ownsona("import-chat", export, "--user", "alice") == 0
    out, err = capsys.readouterr()
    assert "3 memories stored, 0 skipped" in out
    assert "2/2 conversations" in err  # progress on stderr
    # The texts as the user reads them: the command seals them in a sealed run.
    texts = memory_texts(clean_db, "m.user_id = %s AND m.deleted_at IS NULL", (alice,))
    assert sorted(text for _, text in texts) == sorted(
        FACTS["Moving to Lisbon"] + FACTS["Sourdough help"]
    )
    assert ownsona("import-chat", export, "--user", "alice") == 0
    assert "0 memories stored, 3 skipped as already imported" in capsys.readouterr().out
    with psycopg.connect(clean_db) as conn:
        events = conn.execute(
            "SELECT entry, client_id, tool, ok, cardinality(changed_ids) FROM audit_events"
        ).fetchall()
    assert events == [("cli", "ownsona-cli-command", "remember_batch", True, 2)] + [
        ("cli", "ownsona-cli-command", "remember_batch", True, 1)
    ]
    assert ownsona("import-chat", export, "--user", "nobody") == 2
    assert "no account named 'nobody'" in capsys.readouterr().err


async def test_imported_facts_get_the_dates_they_state_counted_from_the_conversation(
    deps: Deps, alice: int, clean_db: str
) -> None:
    server = FactServer(
        {
            # The conversation is dated 2024-03-05 (a Tuesday).
            "Moving to Lisbon": [
                "Yesterday the user signed the lease for a flat in Lisbon.",
                "The user's partner Sam started a new job on 12 February 2024.",
                "The user is moving to Lisbon in April 2024.",
            ]
        }
    )
    try:
        await import_chats(
            deps.pool,
            alice,
            CHATGPT,
            mode="extract",
            store_batch=direct_store(deps, alice, None),
            extractor=fact_extractor(server),
        )
    finally:
        server.close()
    rows = await opened_rows(
        deps,
        "SELECT id, user_id, text, text_sealed, tags_sealed, tags, occurred_at FROM memories"
        " WHERE user_id = %s ORDER BY id",
        (alice,),
    )
    occurred = {
        r["text"]: r["occurred_at"].date().isoformat() if r["occurred_at"] else None for r in rows
    }
    assert occurred == {
        "Yesterday the user signed the lease for a flat in Lisbon.": "2024-03-04",
        "The user's partner Sam started a new job on 12 February 2024.": "2024-02-12",
        # A month is no day: nothing is guessed.
        "The user is moving to Lisbon in April 2024.": None,
    }


async def test_imported_messages_count_relative_dates_from_their_own_time(
    deps: Deps, alice: int, clean_db: str
) -> None:
    await import_chats(
        deps.pool, alice, CLAUDE, mode="messages", store_batch=direct_store(deps, alice, None)
    )
    with psycopg.connect(clean_db) as conn:
        rows = conn.execute(
            "SELECT occurred_at FROM memories WHERE user_id = %s ORDER BY id", (alice,)
        ).fetchall()
    # "the Berlin marathon on 29 September" has no year; the other message states no date.
    assert rows == [(None,), (None,)]


async def test_a_day_the_extractor_gives_a_fact_is_its_occurred_at(
    deps: Deps, alice: int, clean_db: str
) -> None:
    server = FactServer(
        {
            "Moving to Lisbon": [
                {"text": "The user married Sam.", "date": "2019-06-15"},
                # The extractor's day wins over a day the text states.
                {"text": "The user adopted a cat on 2023-05-07.", "date": "2023-05-08"},
                # Not a day: the fact is kept without one.
                {"text": "The user bought a bike.", "date": "June 2020"},
                {"text": "The user sings in a choir.", "date": None},
                "The user's daughter Mia is seven years old.",
                {"date": "2020-01-01"},  # no text: no fact
            ]
        }
    )
    try:
        report = await import_chats(
            deps.pool,
            alice,
            CHATGPT,
            mode="extract",
            store_batch=direct_store(deps, alice, None),
            extractor=fact_extractor(server),
        )
    finally:
        server.close()
    assert report.stored == 5
    assert "YYYY-MM-DD" in server.requests[0]["body"]["messages"][0]["content"]
    rows = await opened_rows(
        deps,
        "SELECT id, user_id, text, text_sealed, tags_sealed, tags, occurred_at,"
        " occurred_at_parsed FROM memories WHERE user_id = %s",
        (alice,),
    )
    occurred = {
        r["text"]: (
            r["occurred_at"].isoformat() if r["occurred_at"] else None,
            r["occurred_at_parsed"],
        )
        for r in rows
    }
    assert occurred == {
        "The user married Sam.": ("2019-06-15T00:00:00+00:00", False),
        "The user adopted a cat on 2023-05-07.": ("2023-05-08T00:00:00+00:00", False),
        "The user bought a bike.": (None, False),
        "The user sings in a choir.": (None, False),
        "The user's daughter Mia is seven years old.": (None, False),
    }


async def test_a_sealed_import_again_skips_what_it_stored_forgotten_included(
    sealed_deps: Deps, alice: int, clean_db: str
) -> None:
    """Sealed (docs/at-rest.md): "already imported" compares the keyed normalized texts."""
    from memory.call_keys import call_scope
    from tests.service.helpers import call

    scope = await call_scope(sealed_deps, alice)
    assert scope is not None
    store = direct_store(sealed_deps, alice, None)
    first = await import_chats(
        sealed_deps.pool, alice, CLAUDE, mode="messages", store_batch=store, keys=scope.keys
    )
    assert first.stored == 2
    assert all(r[0] == "" for r in stored_as_kept(clean_db, alice))  # sealed
    listed = await call(sealed_deps, alice, "list_memories")
    await call(sealed_deps, alice, "forget", id=listed["memories"][0]["id"])
    again = await import_chats(
        sealed_deps.pool, alice, CLAUDE, mode="messages", store_batch=store, keys=scope.keys
    )
    assert (again.stored, again.skipped) == (0, 2)  # the forgotten one does not come back
