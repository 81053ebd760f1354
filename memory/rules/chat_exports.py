"""Reading another assistant's data export: ChatGPT's and Claude's ``conversations.json``.

Pure: bytes in, :class:`ChatExport` out, or :class:`ChatExportError` with a
message a person can act on. Both services export a zip holding
``conversations.json``; either the zip or the JSON file itself is accepted.

- **ChatGPT**: a list of conversations, each with ``title``, ``create_time``
  and ``update_time`` (Unix seconds), ``id`` or ``conversation_id``, and a
  ``mapping`` of node id to ``{message, parent, children}``. The thread shown
  is the path from ``current_node`` up through ``parent`` links; it is walked
  iteratively, at most once per node, so a cycle or a deep chain is bounded.
- **Claude**: a list of conversations with ``uuid``, ``name``,
  ``created_at``/``updated_at`` (ISO 8601) and ``chat_messages``, each with
  ``uuid``, ``sender`` (``human`` or ``assistant``), ``created_at`` and
  ``text`` and/or ``content: [{type: "text", text}]``.

Only the user's own messages are kept (with their times), in thread order;
the assistant's are counted, never returned.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

CHATGPT = "chatgpt"
CLAUDE = "claude"
#: What each format is called on a page.
FORMAT_NAMES = {CHATGPT: "ChatGPT", CLAUDE: "Claude"}
#: The largest export read, in bytes (after unzipping).
MAX_EXPORT_BYTES = 256 * 1024 * 1024
#: The file a zip export holds the conversations in.
CONVERSATIONS_FILE = "conversations.json"
#: Messages shorter than this (after trimming), or among TRIVIAL, say nothing durable.
MIN_MESSAGE_CHARS = 12
TRIVIAL = frozenset(
    {
        "ok",
        "okay",
        "thanks",
        "thank you",
        "thanks!",
        "thank you!",
        "yes",
        "no",
        "continue",
        "go on",
        "please continue",
        "sounds good",
        "great, thanks",
        "perfect, thanks",
    }
)


class ChatExportError(ValueError):
    """The file is not an export this module reads; the message says why (no file content)."""


@dataclass(frozen=True)
class ChatMessage:
    """One of the user's own messages."""

    id: str
    text: str
    at: datetime | None


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    started_at: datetime | None
    ended_at: datetime | None
    #: The user's messages, in thread order.
    messages: tuple[ChatMessage, ...]
    #: Every message with text in the thread, the assistant's included.
    total_messages: int


@dataclass(frozen=True)
class ExportSummary:
    format: str
    conversations: int
    messages: int
    user_messages: int
    first_at: datetime | None
    last_at: datetime | None

    @property
    def format_name(self) -> str:
        return FORMAT_NAMES[self.format]


@dataclass(frozen=True)
class ChatExport:
    format: str
    conversations: tuple[Conversation, ...]

    @property
    def summary(self) -> ExportSummary:
        times = [
            t
            for c in self.conversations
            for t in (c.started_at, c.ended_at, *(m.at for m in c.messages))
            if t is not None
        ]
        return ExportSummary(
            format=self.format,
            conversations=len(self.conversations),
            messages=sum(c.total_messages for c in self.conversations),
            user_messages=sum(len(c.messages) for c in self.conversations),
            first_at=min(times, default=None),
            last_at=max(times, default=None),
        )


_NOT_AN_EXPORT = (
    "This is not a ChatGPT or Claude data export. Upload the conversations.json file "
    "(or the whole export .zip) that ChatGPT or Claude sent you."
)


def parse_export(data: bytes, *, max_bytes: int = MAX_EXPORT_BYTES) -> ChatExport:
    """The conversations of a ChatGPT or Claude export (a zip or its ``conversations.json``)."""
    if data[:4] == b"PK\x03\x04":
        data = _from_zip(data, max_bytes)
    if len(data) > max_bytes:
        raise ChatExportError(f"The file is larger than {max_bytes} bytes.")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ChatExportError(
            "The file is not UTF-8 text, so it is not a conversations.json export."
        ) from None
    try:
        document = json.loads(text)
    except RecursionError:
        raise ChatExportError("The file is nested too deeply to be an export.") from None
    except ValueError as ex:
        raise ChatExportError(
            f"The file is not valid JSON (line {getattr(ex, 'lineno', '?')}): "
            "it is not a conversations.json export."
        ) from None
    if not isinstance(document, list):
        raise ChatExportError(_NOT_AN_EXPORT)
    kind = detect_format(document)
    parse = _chatgpt_conversation if kind == CHATGPT else _claude_conversation
    conversations = []
    for index, raw in enumerate(document):
        if not isinstance(raw, dict):
            raise ChatExportError(f"Conversation {index + 1} of the file is not a JSON object.")
        conversations.append(parse(raw, index))
    return ChatExport(format=kind, conversations=tuple(conversations))


def detect_format(document: list[Any]) -> str:
    """``chatgpt`` or ``claude``, from the first conversation's keys."""
    first = next((c for c in document if isinstance(c, dict)), None)
    if first is None:
        if not document:
            raise ChatExportError("The file holds no conversations.")
        raise ChatExportError(_NOT_AN_EXPORT)
    if isinstance(first.get("mapping"), dict):
        return CHATGPT
    if isinstance(first.get("chat_messages"), list):
        return CLAUDE
    raise ChatExportError(_NOT_AN_EXPORT)


def is_trivial(text: str) -> bool:
    """A message that says nothing worth remembering ("thanks", "ok", a few characters)."""
    stripped = text.strip()
    return len(stripped) < MIN_MESSAGE_CHARS or stripped.lower().rstrip(".! ") in TRIVIAL


def _from_zip(data: bytes, max_bytes: int) -> bytes:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == CONVERSATIONS_FILE]
            if not names:
                raise ChatExportError(f"The zip file holds no {CONVERSATIONS_FILE}.")
            name = min(names, key=len)
            if archive.getinfo(name).file_size > max_bytes:
                raise ChatExportError(
                    f"{CONVERSATIONS_FILE} in the zip is larger than {max_bytes} bytes."
                )
            with archive.open(name) as member:
                content = member.read(max_bytes + 1)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError):
        raise ChatExportError("The zip file could not be read.") from None
    if len(content) > max_bytes:
        raise ChatExportError(f"{CONVERSATIONS_FILE} in the zip is larger than {max_bytes} bytes.")
    return content


def _chatgpt_conversation(raw: dict[str, Any], index: int) -> Conversation:
    mapping = raw.get("mapping")
    if not isinstance(mapping, dict):
        raise ChatExportError(f"Conversation {index + 1} has no message mapping (not ChatGPT's).")
    conversation_id = _text_field(raw, "id") or _text_field(raw, "conversation_id")
    if not conversation_id:
        raise ChatExportError(f"Conversation {index + 1} has no id.")
    mine: list[ChatMessage] = []
    total = 0
    for node_id, node in _chatgpt_thread(mapping, raw.get("current_node")):
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        text = _chatgpt_text(message)
        if not text:
            continue
        total += 1
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        if role != "user" or _hidden(message):
            continue
        at = _epoch(message.get("create_time"))
        mine.append(ChatMessage(id=_text_field(message, "id") or node_id, text=text, at=at))
    return Conversation(
        id=conversation_id,
        title=_text_field(raw, "title"),
        started_at=_epoch(raw.get("create_time")),
        ended_at=_epoch(raw.get("update_time")),
        messages=tuple(mine),
        total_messages=total,
    )


def _chatgpt_thread(mapping: dict[str, Any], current: object) -> list[tuple[str, dict[str, Any]]]:
    """The nodes from the root to ``current_node``, each once (a cycle ends the walk)."""
    if not isinstance(current, str) or current not in mapping:
        current = _latest_leaf(mapping)
    path: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    node_id: object = current
    while isinstance(node_id, str) and node_id not in seen and len(seen) < len(mapping):
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            break
        seen.add(node_id)
        path.append((node_id, node))
        node_id = node.get("parent")
    path.reverse()
    return path


def _latest_leaf(mapping: dict[str, Any]) -> str | None:
    """Without ``current_node``: the childless node written last."""
    best: tuple[float, str] | None = None
    for node_id, node in mapping.items():
        if not isinstance(node, dict) or node.get("children"):
            continue
        message = node.get("message")
        at = message.get("create_time") if isinstance(message, dict) else None
        key = (float(at) if isinstance(at, int | float) else 0.0, node_id)
        if best is None or key > best:
            best = key
    return best[1] if best else None


def _chatgpt_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if not isinstance(content, dict):
        return ""
    if content.get("content_type") not in ("text", "multimodal_text"):
        return ""  # code, tool output, custom instructions, browsing results
    parts = content.get("parts")
    if not isinstance(parts, list):
        return ""
    return "\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())


def _hidden(message: dict[str, Any]) -> bool:
    metadata = message.get("metadata")
    return (
        isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation") is True
    )


def _claude_conversation(raw: dict[str, Any], index: int) -> Conversation:
    messages = raw.get("chat_messages")
    if not isinstance(messages, list):
        raise ChatExportError(f"Conversation {index + 1} has no chat_messages (not Claude's).")
    conversation_id = _text_field(raw, "uuid")
    if not conversation_id:
        raise ChatExportError(f"Conversation {index + 1} has no uuid.")
    mine: list[ChatMessage] = []
    total = 0
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        text = _claude_text(message)
        if not text:
            continue
        total += 1
        if message.get("sender") != "human":
            continue
        message_id = _text_field(message, "uuid") or f"{conversation_id}#{position}"
        mine.append(ChatMessage(id=message_id, text=text, at=_iso(message.get("created_at"))))
    return Conversation(
        id=conversation_id,
        title=_text_field(raw, "name"),
        started_at=_iso(raw.get("created_at")),
        ended_at=_iso(raw.get("updated_at")),
        messages=tuple(mine),
        total_messages=total,
    )


def _claude_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        texts = [
            block["text"].strip()
            for block in content
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
            and block["text"].strip()
        ]
        if texts:
            return "\n".join(texts)
    text = message.get("text")
    return text.strip() if isinstance(text, str) else ""


def _text_field(raw: dict[str, Any], name: str) -> str:
    value = raw.get(name)
    return value.strip() if isinstance(value, str) else ""


def _epoch(value: object) -> datetime | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _iso(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
