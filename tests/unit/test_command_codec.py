"""A command's JSON across an upgrade: tuples by their type, defaults by their factory.

A worker decodes messages queued by an older web process, so a field added
later (with a default or a default factory) must take that default when a
message lacks it, and a tuple field must come back a tuple however its
annotation is spelt (an alias, ``| None``, ``Optional``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Optional

import pytest

from config.settings import Settings
from memory.commands import REGISTERED, Command, Forget, RememberBatch, from_json
from memory.commands.codec import command
from memory.errors import MemoryServiceError
from tests.tool_calls import parse_command

IdTuple = tuple[int, ...]


@dataclass(frozen=True)
class _Tagged(Command):
    """A command as a later release might grow it."""

    ids: IdTuple
    maybe_ids: tuple[int, ...] | None
    old_style: Optional[tuple[str, ...]]  # noqa: UP045  (the spelling under test)
    notes: list[str] = field(default_factory=list)
    labels: tuple[str, ...] = field(default_factory=lambda: ("new",))
    limit: int = 10


@pytest.fixture
def tagged() -> Iterator[type[_Tagged]]:
    command(_Tagged)
    yield _Tagged
    REGISTERED.pop(_Tagged.type_name())


def test_tuple_fields_come_back_as_tuples_whatever_the_spelling(tagged):
    sent = tagged(ids=(1, 2), maybe_ids=(3,), old_style=("a",), notes=["n"], labels=("x",))
    back = from_json(sent.to_json())
    assert back == sent
    assert isinstance(back.ids, tuple) and isinstance(back.maybe_ids, tuple)
    assert isinstance(back.old_style, tuple) and isinstance(back.labels, tuple)
    assert isinstance(back.notes, list)


def test_a_message_without_the_new_fields_takes_their_defaults_and_factories(tagged):
    # Queued by the release before the fields existed: only the old ones.
    old = {"command": tagged.type_name(), "ids": [4], "maybe_ids": None, "old_style": None}
    back = from_json(old)
    assert back == tagged(ids=(4,), maybe_ids=None, old_style=None)
    assert back.notes == [] and back.labels == ("new",) and back.limit == 10


def test_a_message_lacking_a_field_without_default_is_refused(tagged):
    with pytest.raises(KeyError):
        from_json({"command": tagged.type_name(), "maybe_ids": None, "old_style": None})


def test_the_real_commands_round_trip():
    settings = Settings()
    batch = parse_command(
        "remember_batch", {"items": [{"text": "I grow basil.", "supersedes": [3]}, {}]}, settings
    )
    assert isinstance(batch, RememberBatch)
    back = from_json(batch.to_json())
    assert isinstance(back, RememberBatch) and back.to_json() == batch.to_json()
    assert back.items[0] == batch.items[0]
    assert isinstance(back.items, tuple) and isinstance(back.items[1], MemoryServiceError)
    forget = parse_command("forget", {"id": 7, "reason": "wrong"}, settings)
    assert isinstance(forget, Forget) and from_json(forget.to_json()) == forget
