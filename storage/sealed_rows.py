"""Sealed memory rows (migration 0023, docs/at-rest.md): sealing what is written, opening what is read.

The keys come from the call's scope (``storage.sealing.scope``): a row is sealed when
``text_sealed`` is not NULL, and opened with the keys of its user, which the
scope must hold; a plain row reads as before. What a sealed row stores:

- ``text`` '' and ``text_sealed`` the text (associated data: user, row, ``text``);
- ``tags`` the tags' keyed hashes (filters, counts, the GIN index) and
  ``tags_sealed`` the list itself, as JSON (``tags``);
- ``normalized_text`` the keyed hash of the normalized text (the unique index);
- ``sealed_search`` the keyed hashes of the lexemes ``to_tsvector`` gives the text
  (the lexical side and the term statistics); ``text_chars`` the text's length;
- (migration 0024) ``metadata`` '{}' and ``metadata_sealed`` the metadata as JSON;
  ``forget_reason`` NULL and ``forget_reason_sealed`` the reason.

Each field opens wherever its sealed column is set (:data:`SEALED_FIELDS`): a reason
sealed on a row forgotten before the move opens on its own. Recall's rows open each
field when it is first read (``storage.rows.deferred_row``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from storage.sealing.errors import SealedValueError, SealingError
from storage.sealing.scope import keys_for, sealing_writes
from storage.sealing.user_keys import TEXT, UserKeys

#: Each field a sealed row keeps sealed: its sealed column, and whether it opens as JSON.
#: The associated data's column is the field's name.
SEALED_FIELDS: dict[str, tuple[str, bool]] = {
    "text": ("text_sealed", False),
    "tags": ("tags_sealed", True),
    "metadata": ("metadata_sealed", True),
    "forget_reason": ("forget_reason_sealed", False),
}
#: The columns a memory row's SELECT adds to the row's own: the sealed ones (opened, not
#: shown) and ``text_chars`` (a sealed row's length, known without opening it).
SEALED_COLUMNS = (*(column for column, _ in SEALED_FIELDS.values()), "text_chars")
#: Text search configuration of the lexemes (as ``memories.text_search``, migration 0002).
TEXT_SEARCH_CONFIG = "english"


def _keys(user_id: int) -> UserKeys:
    keys = keys_for(user_id)
    if keys is None:
        raise SealingError(
            f"a sealed memory of user {user_id} was read without the user's keys"
            " (no master key configured in this process?)"
        )
    return keys


def keys_of(user_id: int) -> UserKeys:
    """The keys in scope for ``user_id``'s sealed values; :class:`SealingError` if none."""
    return _keys(user_id)


def sealed_values(values: Mapping[str, Any]) -> dict[str, bytes]:
    """``{field: sealed value}`` of the fields sealed in ``values`` (a row as read)."""
    out = {}
    for name, (column, _) in SEALED_FIELDS.items():
        sealed = values.get(column)
        if sealed is not None:
            out[name] = bytes(sealed)
    return out


def open_field(keys: UserKeys, row_id: int, name: str, sealed: bytes) -> Any:
    """The field ``name`` of row ``row_id`` opened from its sealed value."""
    opened_text = keys.open(sealed, row_id, name)
    return json.loads(opened_text) if SEALED_FIELDS[name][1] else opened_text


def opened(values: Mapping[str, Any], user_id: int | None = None) -> Mapping[str, Any]:
    """``values`` with ``text``, ``tags``, ``metadata`` and ``forget_reason`` opened where
    sealed (else as they are)."""
    sealed = sealed_values(values)
    if not sealed:
        return values
    owner = int(values["user_id"] if user_id is None else user_id)
    keys, row_id = _keys(owner), int(values["id"])
    out = dict(values)
    for name, value in sealed.items():
        out[name] = open_field(keys, row_id, name, value)
    return out


def open_reason(user_id: int, row_id: int, reason: str | None, sealed: bytes | None) -> str | None:
    if sealed is None:
        return reason
    return _keys(user_id).open(bytes(sealed), row_id, "forget_reason")


def seal_reasons(
    user_id: int, row_ids: Sequence[int], reason: str | None
) -> list[bytes | None] | None:
    """A forget reason sealed for each row when the call seals (None: write it plain)."""
    keys = sealing_writes(user_id)
    if keys is None:
        return None
    return [None if reason is None else keys.seal(reason, i, "forget_reason") for i in row_ids]


def seal_metadata(keys: UserKeys, row_id: int, metadata: Mapping[str, Any]) -> bytes:
    return keys.seal(json.dumps(dict(metadata)), row_id, "metadata")


def open_text(user_id: int, row_id: int, text: str, text_sealed: bytes | None) -> str:
    if text_sealed is None:
        return text
    return _keys(user_id).open(bytes(text_sealed), row_id, "text")


def open_tags(user_id: int, row_id: int, tags: list[str], tags_sealed: bytes | None) -> list[str]:
    if tags_sealed is None:
        return tags
    opened_tags: list[str] = json.loads(_keys(user_id).open(bytes(tags_sealed), row_id, "tags"))
    return opened_tags


def tag_filter(user_id: int, tags: Sequence[str]) -> list[str]:
    """What a filter on ``tags`` compares with the ``tags`` column (``&&``): the tags
    themselves for plain rows and, with the user's keys in scope, their keyed hashes."""
    keys = keys_for(user_id) if tags else None
    if keys is None:
        return list(tags)
    return [*tags, *keys.keyed_tags(tags)]


def normalized_keys(user_id: int, normalized: Sequence[str]) -> dict[str, str]:
    """``{stored normalized_text: normalized text}``: for a sealing call, the keyed hashes
    and the texts themselves (a plain row not yet moved by ``ownsona seal``)."""
    plain = {t: t for t in normalized}
    keys = sealing_writes(user_id)
    if keys is None:
        return plain
    return {**plain, **{keys.keyed(TEXT, t): t for t in normalized}}


def query_terms(user_id: int, terms: Iterable[str]) -> dict[str, str]:
    """``{stored term: lexeme}`` for a query's lexemes: keyed hashes when the call seals."""
    keys = sealing_writes(user_id)
    if keys is None:
        return {t: t for t in terms}
    return {keys.keyed(b"terms", t): t for t in terms}


def searches_sealed(user_id: int) -> bool:
    """Whether the lexical side reads ``sealed_search`` (the call seals) or ``text_search``."""
    return sealing_writes(user_id) is not None


@dataclass(frozen=True)
class SealedColumns:
    """One new row's sealed columns, and its keyed terms (for the statistics)."""

    id: int
    text: str
    normalized_text: str
    tags: list[str]
    text_sealed: bytes
    tags_sealed: bytes
    sealed_terms: list[str]
    text_chars: int


async def seal_new(
    conn: AsyncConnection,
    keys: UserKeys,
    texts: Sequence[str],
    normalized: Sequence[str],
    tags: Sequence[Sequence[str]],
) -> list[SealedColumns]:
    """Draw the rows' ids and their lexemes (one round trip; the texts are not stored),
    and seal each row's columns bound to its id."""
    cur = await conn.execute(
        "SELECT ownsona_next_id('memories_id_seq'::regclass),"
        " tsvector_to_array(to_tsvector(%s::regconfig, u.t))"
        " FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i) ORDER BY u.i",
        (TEXT_SEARCH_CONFIG, list(texts)),
    )
    drawn = await cur.fetchall()
    out = []
    for (row_id, lexemes), text, norm, row_tags in zip(drawn, texts, normalized, tags, strict=True):
        row_id = int(row_id)
        out.append(
            SealedColumns(
                id=row_id,
                text="",
                normalized_text=keys.keyed(TEXT, norm),
                tags=keys.keyed_tags(row_tags),
                text_sealed=keys.seal(text, row_id, "text"),
                tags_sealed=keys.seal(json.dumps(list(row_tags)), row_id, "tags"),
                sealed_terms=sorted(set(keys.keyed_terms(lexemes))),
                text_chars=len(text),
            )
        )
    return out


def _seals(keys: UserKeys, row_id: int, sealed: bytes | None, text: str) -> bool:
    """Whether ``sealed`` is this row's text sealed as ``text``."""
    if sealed is None:
        return False
    try:
        return keys.open(bytes(sealed), row_id, "text") == text
    except SealedValueError:
        return False  # not this row's: sealed again below


async def seal_changes(
    conn: AsyncConnection, keys: UserKeys, row_id: int, changes: dict[str, Any]
) -> dict[str, Any]:
    """An update's ``changes`` of ``text``, ``normalized_text`` or ``tags``, sealed for the row."""
    out = dict(changes)
    if "text" in changes:
        text = changes["text"]
        cur = await conn.execute(
            "SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s)),"
            " (SELECT text_sealed FROM memories WHERE user_id = %s AND id = %s)",
            (TEXT_SEARCH_CONFIG, text, keys.user_id, row_id),
        )
        row = await cur.fetchone()
        assert row is not None
        out["text"] = ""
        # The same text keeps its sealed value: a fresh nonce would read as a new text, and
        # the update would owe the relation extraction again (memory_writes.update_fields).
        out["text_sealed"] = (
            bytes(row[1]) if _seals(keys, row_id, row[1], text) else keys.seal(text, row_id, "text")
        )
        out["sealed_search"] = sorted(set(keys.keyed_terms(row[0])))
        out["text_chars"] = len(text)
    if "normalized_text" in changes:
        out["normalized_text"] = keys.keyed(TEXT, changes["normalized_text"])
    if "tags" in changes:
        out["tags"] = keys.keyed_tags(changes["tags"])
        out["tags_sealed"] = keys.seal(json.dumps(list(changes["tags"])), row_id, "tags")
    return out
