"""Chat exports uploaded to the console, parsed, waiting for the owner's "Import".

Kept in PostgreSQL (``console_uploads``) so the confirm may reach another web
process than the upload did. What is kept is the parsed export (the user's
own messages, as JSON), not the uploaded file: never the assistant's answers
or the attachments of an export's zip, and the confirm need not parse the
file again. An upload waits :data:`KEEP_S` at most and is removed when its
import starts.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from memory import console_jobs as rows
from memory.rules.chat_exports import ChatExport, ChatMessage, Conversation
from storage.sealing.scope import Scope

#: Seconds an uploaded export waits for its confirmation.
KEEP_S = 3600


@dataclass(frozen=True)
class Uploaded:
    id: str
    filename: str
    export: ChatExport


async def put(
    pool: AsyncConnectionPool,
    user_id: int,
    export: ChatExport,
    filename: str,
    scope: Scope | None = None,
) -> str:
    """Keep the parsed export; sealed with ``scope``'s keys when it seals (the user's messages)."""
    upload_id = secrets.token_urlsafe(16)
    # Expired uploads (their users' own messages) go now, not at some later job's prune.
    await rows.prune_uploads(pool, older_than_s=KEEP_S)
    await rows.put_upload(
        pool,
        upload_id=upload_id,
        user_id=user_id,
        filename=filename,
        export=to_json(export),
        scope=scope,
    )
    return upload_id


async def get(
    pool: AsyncConnectionPool, user_id: int, upload_id: str, scope: Scope | None = None
) -> Uploaded | None:
    """The user's upload; None for an unknown, expired or another user's id."""
    if not upload_id:
        return None
    row = await rows.get_upload(pool, user_id, upload_id, max_age_s=KEEP_S, scope=scope)
    if row is None:
        return None
    return Uploaded(row.id, row.filename, from_json(row.export))


async def discard(pool: AsyncConnectionPool, user_id: int, upload_id: str) -> None:
    await rows.delete_upload(pool, user_id, upload_id)


def to_json(export: ChatExport) -> dict[str, Any]:
    return {
        "format": export.format,
        "conversations": [
            {
                "id": c.id,
                "title": c.title,
                "started_at": _time(c.started_at),
                "ended_at": _time(c.ended_at),
                "total_messages": c.total_messages,
                "messages": [{"id": m.id, "text": m.text, "at": _time(m.at)} for m in c.messages],
            }
            for c in export.conversations
        ],
    }


def from_json(data: dict[str, Any]) -> ChatExport:
    return ChatExport(
        format=data["format"],
        conversations=tuple(
            Conversation(
                id=c["id"],
                title=c["title"],
                started_at=_parse(c["started_at"]),
                ended_at=_parse(c["ended_at"]),
                total_messages=c["total_messages"],
                messages=tuple(
                    ChatMessage(id=m["id"], text=m["text"], at=_parse(m["at"]))
                    for m in c["messages"]
                ),
            )
            for c in data["conversations"]
        ),
    )


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _parse(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)
