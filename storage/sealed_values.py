"""Sealed values beside the memories (migration 0025, docs/at-rest.md): receipts, uploads, audit.

The same rule as ``storage.sealed_rows``: a value is sealed when the call's scope
seals writes for its user (``storage.sealing.scope.sealing_writes``), bound to its user, its
row and its column; it is opened with the keys in scope, and a sealed value read
with none is refused (:class:`SealingError`), never shown as its placeholder. A
plain value (written before sealing, or with sealing off) reads as it is.

Rows named by text (a receipt's idempotency key, an upload's id) are bound with
``UserKeys.seal_named``; numbered rows (audit events) with ``UserKeys.seal``.
"""

from __future__ import annotations

import json
from typing import Any

from storage.sealing.errors import SealingError
from storage.sealing.scope import keys_for, sealing_writes
from storage.sealing.user_keys import UserKeys


def _keys(user_id: int, what: str) -> UserKeys:
    keys = keys_for(user_id)
    if keys is None:
        raise SealingError(
            f"a sealed {what} of user {user_id} was read without the user's keys"
            " (no master key configured in this process?)"
        )
    return keys


def seal_named_json(user_id: int, row_key: str, column: str, value: Any) -> bytes | None:
    """``value`` as JSON sealed for the row named ``row_key``; None: this call writes plain."""
    keys = sealing_writes(user_id)
    if keys is None:
        return None
    return keys.seal_named(json.dumps(value), row_key, column)


def seal_named_text(user_id: int, row_key: str, column: str, value: str) -> bytes | None:
    """``value`` sealed for the row named ``row_key``; None: this call writes plain."""
    keys = sealing_writes(user_id)
    if keys is None:
        return None
    return keys.seal_named(value, row_key, column)


def open_named_json(
    user_id: int, row_key: str, column: str, plain: Any, sealed: bytes | None
) -> Any:
    """The stored value: ``plain`` for a plain row, else ``sealed`` opened."""
    if sealed is None:
        return plain
    keys = _keys(user_id, column)
    return json.loads(keys.open_named(bytes(sealed), row_key, column))


def open_named_text(
    user_id: int, row_key: str, column: str, plain: str, sealed: bytes | None
) -> str:
    if sealed is None:
        return plain
    return _keys(user_id, column).open_named(bytes(sealed), row_key, column)


def open_text(
    user_id: int, row_id: int, column: str, plain: str | None, sealed: bytes | None
) -> str | None:
    """A numbered row's text column: ``plain`` for a plain row, else ``sealed`` opened."""
    if sealed is None:
        return plain
    return _keys(user_id, column).open(bytes(sealed), row_id, column)
