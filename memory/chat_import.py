"""Importing conversations from other assistants (ChatGPT, Claude) as memories.

Two modes, over what :mod:`memory.rules.chat_exports` read from the export:

- ``extract``: a fact extractor (an LLM: ``LLM_BASE_URL``, ``LLM_MODEL``)
  reads each conversation's user messages, with the conversation's date so
  relative dates resolve, and the durable facts it lists are stored
  (``capture_mode`` ``inferred``), with that date as their ``reference_time``.
- ``messages``: no extractor needed; the user's own messages are stored as
  they are, tagged ``imported``, trivial ones skipped, each cut to
  ``MAX_TEXT_CHARS`` (``capture_mode`` ``explicit``: the owner chose to store
  their own words), each with its message's time as ``reference_time``.

A date a stored text states ("on 7 May 2023", "yesterday" counted from the
``reference_time``) becomes the memory's ``occurred_at`` (issue 17).

Either way each memory says where it came from (``source_provider``
``chatgpt-import`` or ``claude-import``, ``session_id`` the conversation id),
and every write goes through ``remember_batch`` (the caller's ``store``: the
console's tool call, or :func:`direct_store` for the command), with an
idempotency key derived from the user, the format, the conversation and its
items. Importing a file again stores nothing twice: what an earlier import
stored with the same provenance and text (forgotten rows included) is skipped
before the write, and in ``extract`` mode a conversation whose facts were all
stored is not sent to the LLM again. Only a conversation whose every batch was
stored counts as done (``chat_import_extracted``): one that failed midway is
extracted again and its facts already stored are skipped.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory.rules.chat_exports import CHATGPT, CLAUDE, ChatExport, Conversation, is_trivial
from memory.rules.text import normalize_text
from memory.rules.timestamps import format_timestamp
from storage import chat_import as store
from storage.sealing.user_keys import TEXT, UserKeys

from .providers.facts import Fact, FactExtractionError, FactExtractor

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool


logger = logging.getLogger("ownsona.memory.chat_import")

EXTRACT = "extract"
MESSAGES = "messages"
MODES = (EXTRACT, MESSAGES)
#: ``source_provider`` of an imported memory, per export format.
PROVIDERS = {CHATGPT: "chatgpt-import", CLAUDE: "claude-import"}
IMPORTED_TAG = "imported"
#: Characters of user messages sent to the extractor in one request.
EXTRACT_CHUNK_CHARS = 12_000

NO_EXTRACTOR = (
    "Extracting facts needs an extractor: set LLM_BASE_URL and LLM_MODEL (any "
    "OpenAI-compatible chat-completions endpoint; LLM_API_KEY if it needs one). "
    "Without one, the messages mode stores your own messages as memories tagged 'imported'."
)

#: ``(items, idempotency_key)`` -> the ``remember_batch`` payload.
StoreBatch = Callable[[list[dict[str, Any]], str], Awaitable[dict[str, Any]]]
#: ``(conversations done, conversations in all, report)``.
Progress = Callable[[int, int, "ImportReport"], None]


class ChatImportError(Exception):
    """The import cannot go on; ``public_message`` says why (no memory text)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.public_message = message


@dataclass
class ImportReport:
    conversations: int = 0
    #: The user's own messages seen.
    messages: int = 0
    stored: int = 0
    #: Already imported (or already stored with the same text): not stored again.
    skipped: int = 0
    #: Items the store refused (e.g. shaped like a secret).
    refused: int = 0
    #: Conversations the extractor failed on (importing again retries them).
    failed_conversations: int = 0

    def describe(self) -> str:
        """One line for a person: counts only, never text."""
        line = (
            f"{self.conversations} conversations, {self.messages} of your messages: "
            f"{self.stored} memories stored, {self.skipped} skipped as already imported"
        )
        if self.refused:
            line += f", {self.refused} refused (secrets or invalid)"
        if self.failed_conversations:
            line += (
                f"; the extractor failed on {self.failed_conversations} conversations "
                "(import again to retry them)"
            )
        return line + "."


def require_mode(mode: str, extractor: FactExtractor | None) -> None:
    """Refuse an import that would silently store nothing: ``extract`` without an extractor."""
    if mode not in MODES:
        raise ChatImportError(f"Unknown import mode {mode!r}: use {EXTRACT} or {MESSAGES}.")
    if mode == EXTRACT and extractor is None:
        raise ChatImportError(NO_EXTRACTOR)


async def import_chats(
    pool: AsyncConnectionPool,
    user_id: int,
    export: ChatExport,
    *,
    mode: str,
    store_batch: StoreBatch,
    extractor: FactExtractor | None = None,
    max_text_chars: int = 16_000,
    max_batch: int = 200,
    progress: Progress | None = None,
    keys: UserKeys | None = None,
) -> ImportReport:
    """Store ``export``'s conversations for ``user_id``; the counts of what happened.

    ``keys``: the user's keys when the deployment seals (docs/at-rest.md): a sealed
    row's normalized text is stored as its keyed hash, which "already imported" then
    compares.
    """
    require_mode(mode, extractor)
    provider = PROVIDERS[export.format]
    report = ImportReport()
    total = len(export.conversations)
    for done, conversation in enumerate(export.conversations):
        report.conversations += 1
        report.messages += len(conversation.messages)
        async with pool.connection() as conn:
            existing = (await store.imported_texts(conn, user_id, provider, [conversation.id])).get(
                conversation.id, set()
            )
            extracted = mode == EXTRACT and bool(
                await store.extracted_conversations(conn, user_id, provider, [conversation.id])
            )
        finished = False
        if mode == MESSAGES:
            items = _message_items(
                conversation, provider, _Known(existing, keys), max_text_chars, report
            )
        elif extracted:
            report.skipped += len(existing)  # extracted before: not sent to the LLM again
            items = []
        else:
            assert extractor is not None
            found = await _fact_items(conversation, provider, extractor, max_text_chars, report)
            finished = found is not None
            items = _unstored(found or [], _Known(existing, keys), report)
        for start in range(0, len(items), max_batch):
            chunk = items[start : start + max_batch]
            key = _key(user_id, export.format, conversation.id, [i.pop("_id") for i in chunk])
            _count(await store_batch(chunk, key), report)
        if finished:
            # Only now: a batch that failed above raised, and the next import extracts again.
            async with pool.connection() as conn:
                await store.mark_extracted(conn, user_id, provider, conversation.id)
        if progress is not None:
            progress(done + 1, total, report)
    return report


class _Known:
    """The normalized texts stored with a conversation's provenance: plain, or keyed."""

    def __init__(self, stored: set[str], keys: UserKeys | None) -> None:
        self._stored, self._keys = stored, keys

    def __contains__(self, normalized: object) -> bool:
        assert isinstance(normalized, str)
        if normalized in self._stored:
            return True
        return self._keys is not None and self._keys.keyed(TEXT, normalized) in self._stored


def _message_items(
    conversation: Conversation,
    provider: str,
    existing: _Known,
    max_chars: int,
    report: ImportReport,
) -> list[dict[str, Any]]:
    items = []
    for message in conversation.messages:
        if is_trivial(message.text):
            continue
        text = message.text[:max_chars]
        if normalize_text(text) in existing:
            report.skipped += 1
            continue
        item = _item(
            text,
            provider,
            conversation.id,
            "explicit",
            message.at,
            reference=message.at or conversation.started_at,
        )
        item["_id"] = "m:" + message.id
        items.append(item)
    return items


def _unstored(
    items: list[dict[str, Any]], existing: _Known, report: ImportReport
) -> list[dict[str, Any]]:
    """The facts an earlier, unfinished import of the conversation did not store."""
    kept = [i for i in items if normalize_text(i["text"]) not in existing]
    report.skipped += len(items) - len(kept)
    return kept


async def _fact_items(
    conversation: Conversation,
    provider: str,
    extractor: FactExtractor,
    max_chars: int,
    report: ImportReport,
) -> list[dict[str, Any]] | None:
    """The conversation's facts as batch items; None when the extractor failed on it."""
    texts = [m.text for m in conversation.messages if not is_trivial(m.text)]
    if not texts:
        return []
    day = conversation.started_at.date() if conversation.started_at else None
    facts: dict[str, Fact] = {}  # by text: a fact found in two chunks is stored once
    try:
        for chunk in _chunks(texts, EXTRACT_CHUNK_CHARS):
            for fact in await extractor.extract(title=conversation.title, day=day, messages=chunk):
                if fact.text not in facts or facts[fact.text].day is None:
                    facts[fact.text] = fact
    except FactExtractionError as ex:
        logger.warning("chat import: fact extraction failed for one conversation: %s", ex)
        report.failed_conversations += 1
        return None
    when = conversation.ended_at or conversation.started_at
    items = []
    for index, fact in enumerate(facts.values()):
        # The extractor resolved relative dates against the conversation's start (``day``):
        # a date left relative in a fact counts from there too.
        item = _item(
            fact.text[:max_chars],
            provider,
            conversation.id,
            "inferred",
            when,
            reference=conversation.started_at,
        )
        if fact.day is not None:  # the extractor's day wins over one read from the text
            on = datetime(fact.day.year, fact.day.month, fact.day.day, tzinfo=UTC)
            item["occurred_at"] = format_timestamp(on)
        digest = hashlib.sha256(fact.text.encode("utf-8")).hexdigest()[:16]
        item["_id"] = f"f:{index}:{digest}"
        items.append(item)
    return items


def _item(
    text: str,
    provider: str,
    session_id: str,
    capture_mode: str,
    at: datetime | None,
    *,
    reference: datetime | None,
) -> dict[str, Any]:
    """One remember_batch item. ``reference``: when the words were written, so that a date
    the text states relatively ("last Tuesday") becomes its occurred_at (issue 17)."""
    item: dict[str, Any] = {
        "text": text,
        "tags": [IMPORTED_TAG],
        "source_provider": provider,
        "capture_mode": capture_mode,
        "session_id": session_id,
        # A fact of the same meaning already stored is not stored again.
        "dedup_policy": "skip_if_near",
    }
    if at is not None and at <= datetime.now(UTC):
        item["last_confirmed_at"] = format_timestamp(at)
    if reference is not None:
        item["reference_time"] = format_timestamp(reference)
    return item


def _chunks(texts: list[str], budget: int) -> list[list[str]]:
    chunks: list[list[str]] = [[]]
    size = 0
    for text in texts:
        text = text[:budget]
        if chunks[-1] and size + len(text) > budget:
            chunks.append([])
            size = 0
        chunks[-1].append(text)
        size += len(text)
    return chunks


def _key(user_id: int, export_format: str, conversation_id: str, item_ids: list[str]) -> str:
    """The idempotency key of one batch: the same items of the same conversation, the same key."""
    material = "\x1f".join([str(user_id), export_format, conversation_id, *item_ids])
    return "chat-import-" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:48]


def _count(payload: dict[str, Any], report: ImportReport) -> None:
    if payload.get("ok") is not True:
        error = payload.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        logger.warning("chat import: remember_batch failed (%s)", code)
        raise ChatImportError(
            f"Storing failed ({code}): {message or 'no reason given'} "
            f"{report.stored} memories were stored before it; importing again skips them."
        )
    for result in payload.get("results", []):
        if result.get("ok") is not True:
            report.refused += 1
        elif result.get("message") == "Already remembered":
            report.skipped += 1
        else:
            report.stored += 1
