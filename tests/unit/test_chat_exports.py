"""Reading ChatGPT's and Claude's conversations.json: the user's messages, counts, dates."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.rules.chat_exports import (
    CHATGPT,
    CLAUDE,
    ChatExportError,
    is_trivial,
    parse_export,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "chat_exports"
CHATGPT_FILE = FIXTURES / "chatgpt_conversations.json"
CLAUDE_FILE = FIXTURES / "claude_conversations.json"


def test_a_chatgpt_export_gives_the_users_messages_on_the_thread_shown() -> None:
    export = parse_export(CHATGPT_FILE.read_bytes())
    assert export.format == CHATGPT
    lisbon, bread = export.conversations
    assert lisbon.id == "6f1c2a4e-0b7d-4c1e-9a52-3d7e8f1b2c01"
    assert lisbon.title == "Moving to Lisbon"
    assert lisbon.started_at == datetime(2024, 3, 5, 12, 0, tzinfo=UTC)
    # The edited-away branch, the system prompt, the custom instructions: none of them.
    assert [m.text for m in lisbon.messages] == [
        "I'm moving to Lisbon next month with my partner Sam. What neighbourhoods are good "
        "for families?",
        "Our daughter Mia is seven and she loves swimming.",
        "thanks!",
    ]
    assert [m.id for m in lisbon.messages] == ["u1", "u2", "u3"]
    assert lisbon.messages[1].at == datetime(2024, 3, 5, 12, 6, tzinfo=UTC)
    assert lisbon.total_messages == 6
    assert [m.id for m in bread.messages] == ["q1", "q2"]
    summary = export.summary
    assert (summary.conversations, summary.messages, summary.user_messages) == (2, 10, 5)
    assert summary.first_at == datetime(2024, 3, 5, 12, 0, tzinfo=UTC)
    assert summary.last_at == datetime(2024, 6, 11, 9, 30, tzinfo=UTC)
    assert summary.format_name == "ChatGPT"


def test_a_claude_export_gives_the_human_messages_never_the_assistants() -> None:
    export = parse_export(CLAUDE_FILE.read_bytes())
    assert export.format == CLAUDE
    marathon, gifts = export.conversations
    assert marathon.id == "1b2c3d4e-5f60-4718-9a2b-3c4d5e6f7a81"
    assert marathon.title == "Marathon training plan"
    assert [m.id for m in marathon.messages] == ["m-1", "m-3"]
    assert marathon.messages[0].at == datetime(2024, 9, 1, 7, 15, 1, tzinfo=UTC)
    # Text in the content blocks counts when the top-level text is empty.
    assert [m.text for m in gifts.messages] == [
        "My brother Tom collects vinyl records of 70s jazz."
    ]
    summary = export.summary
    assert (summary.conversations, summary.messages, summary.user_messages) == (2, 5, 3)
    assert summary.first_at == datetime(2024, 9, 1, 7, 15, 0, 123456, tzinfo=UTC)
    assert summary.last_at == datetime(2024, 12, 2, 18, 10, tzinfo=UTC)


def test_the_export_zip_is_read_like_its_conversations_file() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("conversations.json", CLAUDE_FILE.read_bytes())
    assert parse_export(buffer.getvalue()) == parse_export(CLAUDE_FILE.read_bytes())


def test_a_cycle_in_the_chatgpt_mapping_ends_the_walk() -> None:
    mapping = {
        "a": {"parent": "b", "children": ["b"], "message": _user("a", "I keep bees in my garden.")},
        "b": {"parent": "a", "children": ["a"], "message": _user("b", "My hives face south-east.")},
    }
    export = parse_export(
        json.dumps([{"id": "c", "mapping": mapping, "current_node": "a"}]).encode()
    )
    assert [m.id for m in export.conversations[0].messages] == ["b", "a"]


def test_a_long_chatgpt_thread_is_walked_without_recursion() -> None:
    count = 20_000
    mapping = {
        str(i): {
            "parent": str(i - 1) if i else None,
            "children": [str(i + 1)],
            "message": _user(str(i), f"Message number {i} of a long thread."),
        }
        for i in range(count)
    }
    document = [{"id": "long", "mapping": mapping, "current_node": str(count - 1)}]
    export = parse_export(json.dumps(document).encode())
    assert len(export.conversations[0].messages) == count


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff\xfe{not utf-8 \xe9", "not UTF-8"),
        (b'{"conversations": []}', "not a ChatGPT or Claude"),
        (b"[]", "no conversations"),
        (b'[{"title": "x", "messages": []}]', "not a ChatGPT or Claude"),
        (b"[1, 2, 3]", "not a ChatGPT or Claude"),
        (b'[{"id": "x", "mapping": {}}, "stray"]', "Conversation 2"),
        (b'[{"mapping": {}}]', "no id"),
        (b'[{"uuid": "x", "chat_messages": []}, {"uuid": "y"}]', "no chat_messages"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'[{"id": "x", "mapping": {}', "not valid JSON"),
        (b"PK\x03\x04 not really a zip", "zip file could not be read"),
    ],
)
def test_anything_else_is_refused_with_a_clear_error(data: bytes, says: str) -> None:
    with pytest.raises(ChatExportError, match=says):
        parse_export(data)


def test_a_zip_without_conversations_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("memories.json", "[]")
    with pytest.raises(ChatExportError, match="holds no conversations.json"):
        parse_export(buffer.getvalue())


def test_a_file_over_the_limit_is_refused() -> None:
    with pytest.raises(ChatExportError, match="larger than 100 bytes"):
        parse_export(CLAUDE_FILE.read_bytes(), max_bytes=100)


def test_trivial_messages() -> None:
    assert is_trivial("thanks!") and is_trivial("  ok  ") and is_trivial("Thank you.")
    assert is_trivial("why?")
    assert not is_trivial("My sister lives in Oslo.")


def _user(node_id: str, text: str) -> dict[str, object]:
    return {
        "id": node_id,
        "author": {"role": "user"},
        "content": {"content_type": "text", "parts": [text]},
        "create_time": 1_700_000_000,
    }
