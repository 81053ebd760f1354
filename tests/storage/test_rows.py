"""The one field list of a memory (``storage.rows.MemoryRow``) and what derives from it.

The SELECT lists, the backup's dump, restore and file records and the full
tool shape are all read off ``MemoryRow``; these tests pin that each equals
the list (in order), that the file and wire orders stay what they were, and
that a field added to the row reaches every one of them. Pure: no database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime

import pytest

from memory import backup_format
from memory.backup_format import NO_USER_ID, MemoryRecord, parse_record, record_line
from memory.errors import MemoryServiceError
from memory.shapes import full_shape
from storage import backup as backup_store
from storage import memory_sql
from storage.rows import (
    MemoryRow,
    backup_fields,
    column,
    copy_columns,
    deferred_row,
    memory_row,
    select_list,
    shape_fields,
)
from storage.sealing import envelope
from storage.sealing.errors import SealedValueError, SealingError
from storage.sealing.scope import Scope, sealing_as
from storage.sealing.user_keys import UserKeys

ROW = [f.name for f in fields(MemoryRow)]

#: The order of a backup record's fields on disk (a file written before this
#: list was derived must read back the same).
FILE_ORDER = (
    "type", "user", "id", "text", "tags", "importance", "keep", "source_provider",
    "capture_mode", "session_id", "metadata", "created_at", "updated_at",
    "last_confirmed_at", "expires_at", "occurred_at", "valid_from", "valid_to",
    "occurred_at_parsed", "deleted_at", "forget_reason", "replaced_by_id",
    "salience", "use_count", "context_count", "context_centroid", "embedding_provider",
    "embedding_model", "relations",
)  # fmt: skip
#: The fields version 2 of the format added (event time, issue 17): a version 1 file lacks them.
ADDED_IN_2 = ("occurred_at", "valid_from", "valid_to", "occurred_at_parsed")
#: The order of get_memory's and export_memories' fields on the wire.
WIRE_ORDER = (
    "id", "text", "tags", "importance", "keep", "created_at", "updated_at", "deleted_at",
    "forget_reason", "replaced_by_id", "last_confirmed_at", "expires_at", "occurred_at",
    "valid_from", "valid_to", "occurred_at_parsed", "source_provider",
    "capture_mode", "session_id", "embedding_provider", "embedding_model", "salience",
    "use_count", "context_count",
)  # fmt: skip

WHEN = datetime(2026, 5, 5, 12, 0, 0, 250000, tzinfo=UTC)


def sample(row_type: type[MemoryRow] = MemoryRow, **extra: object) -> MemoryRow:
    return row_type(
        id=7,
        user_id=2,
        text="My sister Ana lives in Lisbon.",
        tags=["family"],
        importance=0.9,
        keep=True,
        source_provider="claude",
        capture_mode=None,
        session_id=None,
        metadata={"k": "v"},
        created_at=WHEN,
        updated_at=WHEN,
        last_confirmed_at=None,
        expires_at=None,
        occurred_at=WHEN,
        valid_from=None,
        valid_to=None,
        occurred_at_parsed=True,
        deleted_at=WHEN,
        forget_reason="moved",
        replaced_by_id=9,
        salience=0.12345678,
        use_count=3,
        context_count=2,
        embedding_provider="local",
        embedding_model="all-MiniLM-L6-v2",
        **extra,  # type: ignore[arg-type]
    )


def test_the_select_lists_are_the_row_fields_in_order_then_the_sealed_columns():
    # The sealed columns (docs/at-rest.md) are read so that a sealed row is opened, and
    # its length, so that recall scales a candidate's lexical share without opening it.
    sealed = ("text_sealed", "tags_sealed", "metadata_sealed", "forget_reason_sealed", "text_chars")
    assert ", ".join((*ROW, *sealed)) == memory_sql.COLUMNS
    assert ", ".join(ROW) == select_list()
    assert ", ".join(f"m.{name}" for name in (*ROW, *sealed)) == memory_sql.M_COLUMNS


def test_a_backup_record_is_the_row_fields_in_order_with_its_account_and_vector():
    expected = [name for name in ROW if name != "user_id"]
    expected.insert(expected.index("context_count") + 1, "context_centroid")
    assert list(backup_fields()) == expected
    assert backup_format._RECORD_KEYS == ("type", "user", *expected, "relations") == FILE_ORDER


def test_a_restore_writes_every_row_column_and_the_ones_a_row_does_not_carry():
    expected = list(ROW)
    expected.insert(expected.index("context_count") + 1, "context_centroid")
    assert [name for name, _ in copy_columns()] == expected
    assert [name for name, _ in backup_store._COPY_COLUMNS] == [
        *expected,
        "normalized_text",
        "embedding",
    ]
    assert dict(backup_store._COPY_COLUMNS)["metadata"] == "jsonb"


def test_the_full_shape_is_the_shown_row_fields_in_wire_order():
    assert shape_fields() == WIRE_ORDER
    assert set(ROW) - set(WIRE_ORDER) == {"user_id", "metadata"}
    assert full_shape(sample()) == {
        "id": 7,
        "text": "My sister Ana lives in Lisbon.",
        "tags": ["family"],
        "importance": 0.9,
        "keep": True,
        "created_at": "2026-05-05T12:00:00.250000Z",
        "updated_at": "2026-05-05T12:00:00.250000Z",
        "deleted_at": "2026-05-05T12:00:00.250000Z",
        "forget_reason": "moved",
        "replaced_by_id": 9,
        "last_confirmed_at": None,
        "expires_at": None,
        "occurred_at": "2026-05-05T12:00:00.250000Z",
        "valid_from": None,
        "valid_to": None,
        "occurred_at_parsed": True,
        "source_provider": "claude",
        "capture_mode": None,
        "session_id": None,
        "embedding_provider": "local",
        "embedding_model": "all-MiniLM-L6-v2",
        "salience": 0.123457,
        "use_count": 3,
        "context_count": 2,
    }
    assert list(full_shape(sample())) == list(WIRE_ORDER)


def test_a_record_line_reads_back_as_the_same_record():
    record = MemoryRecord("alice", sample(), [0.25, -0.5], ())
    line = record_line(record)
    assert list(json.loads(line)) == list(FILE_ORDER)
    back = parse_record(2, line)
    assert back.memory.user_id == NO_USER_ID
    assert back == MemoryRecord("alice", replace(sample(), user_id=NO_USER_ID), [0.25, -0.5], ())


def test_a_version_1_record_reads_back_with_no_event_time():
    record = MemoryRecord("alice", sample(), None, ())
    line = {k: v for k, v in json.loads(record_line(record)).items() if k not in ADDED_IN_2}
    back = parse_record(2, json.dumps(line), version=1)
    assert back.memory == replace(
        sample(), user_id=NO_USER_ID, occurred_at=None, occurred_at_parsed=False
    )
    # Each version's records name exactly its fields.
    missing = parse_record_error(json.dumps(line), version=2)
    assert "missing fields" in missing and "occurred_at" in missing
    full = record_line(record)
    assert "unknown fields" in parse_record_error(full, version=1)


def parse_record_error(line: str, *, version: int) -> str:
    try:
        parse_record(2, line, version=version)
    except MemoryServiceError as ex:
        return ex.message
    raise AssertionError("the record was accepted")


def test_a_record_whose_span_ends_before_it_starts_is_refused():
    bad = replace(sample(), valid_from=WHEN, valid_to=datetime(2020, 1, 1, tzinfo=UTC))
    assert "valid_from is after valid_to" in parse_record_error(
        record_line(MemoryRecord("alice", bad, None, ())), version=2
    )
    orphan = replace(sample(), occurred_at=None)
    assert "occurred_at_parsed" in parse_record_error(
        record_line(MemoryRecord("alice", orphan, None, ())), version=2
    )


@dataclass(frozen=True)
class WiderRow(MemoryRow):
    """The row with one more field, as a migration adding a column would make it."""

    mood: str | None = field(default=None, metadata=column("text"))


def test_a_field_added_to_the_row_appears_in_every_list():
    assert select_list(WiderRow).endswith(", mood")
    assert select_list(WiderRow, prefix="m.").endswith(", m.mood")
    assert backup_fields(WiderRow)[-1] == "mood"
    assert copy_columns(WiderRow)[-1] == ("mood", "text")
    assert shape_fields(WiderRow)[-1] == "mood"

    row = sample(WiderRow, mood="calm")
    assert memory_row({**{n: getattr(row, n) for n in ROW}, "mood": "calm"}, WiderRow) == row
    assert list(full_shape(row))[-1] == "mood" and full_shape(row)["mood"] == "calm"
    line = json.loads(record_line(MemoryRecord("alice", row, None, ())))
    assert list(line)[-2:] == ["mood", "relations"] and line["mood"] == "calm"


def _sealed_values(keys: UserKeys, row: MemoryRow) -> dict[str, object]:
    """``row`` as a SELECT of a sealed row returns it (storage.sealed_rows)."""
    return {
        **{n: getattr(row, n) for n in ROW},
        "text": "",
        "tags": keys.keyed_tags(row.tags),
        "metadata": {},
        "forget_reason": None,
        "text_sealed": keys.seal(row.text, row.id, "text"),
        "tags_sealed": keys.seal(json.dumps(row.tags), row.id, "tags"),
        "metadata_sealed": keys.seal(json.dumps(row.metadata), row.id, "metadata"),
        "forget_reason_sealed": keys.seal(row.forget_reason or "", row.id, "forget_reason"),
        "text_chars": len(row.text),
    }


def test_a_row_read_for_ranking_opens_its_sealed_fields_when_first_read():
    keys = UserKeys(2, envelope.new_data_key())
    plain = replace(sample(), text="Ana's café is in Lisbon.")  # characters, not bytes
    values = _sealed_values(keys, plain)
    with sealing_as(Scope(keys, seal_writes=True)):
        eager, deferred = memory_row(values), deferred_row(values)
    # Read out of the scope: the keys were the ones in scope when the row was read.
    assert [getattr(deferred, n) for n in ROW] == [getattr(eager, n) for n in ROW]
    assert [getattr(eager, n) for n in ROW] == [getattr(plain, n) for n in ROW]
    assert deferred.chars == eager.chars == len(plain.text)
    # A plain row is the row itself.
    plain_values = {**{n: getattr(plain, n) for n in ROW}, "text_sealed": None}
    assert deferred_row(plain_values) == plain


def test_a_deferred_value_that_does_not_open_fails_when_read_and_not_before():
    keys = UserKeys(2, envelope.new_data_key())
    plain = sample()
    values = _sealed_values(keys, plain)
    # The text sealed for another row: its length is known without opening it.
    values["text_sealed"] = keys.seal(plain.text, plain.id + 1, "text")
    with sealing_as(Scope(keys, seal_writes=True)):
        row = deferred_row(values)
    assert row.chars == len(plain.text) and row.tags == plain.tags
    with pytest.raises(SealedValueError, match="does not open"):
        row.text  # noqa: B018
    # Another user's keys, or none, are refused when the row is read, as for any row.
    other = Scope(UserKeys(3, envelope.new_data_key()), seal_writes=True)
    with sealing_as(other), pytest.raises(SealedValueError, match="not user"):
        deferred_row(values)
    with pytest.raises(SealingError, match="without the user's keys"):
        deferred_row(values)
