"""One write, one transaction, at most once per idempotency key (DESIGN: quality bars).

The answer to a write is stored as a receipt in the write's own transaction:
a message redelivered after a worker died, or a client retrying the same
request, finds the receipt and gets the first answer back instead of writing
again.

Two kinds of key (the API builds them, ``api/mcp/dispatch.py``):

- an **operation key** (an explicit key the client sent, or session +
  request id): the same operation for as long as receipts are kept
  (``RECEIPT_TTL_S``);
- a **retry-window key** (``WINDOW_PREFIX`` + a hash of user, tool and
  canonical arguments), for clients that send no key and may retry with a
  new request id (MCP 2026-07-28 has no session). Its receipt stands for
  ``Settings.idempotency_window_s`` seconds, and only while no later write
  of the same user named one of the memories its result names: once
  a forget has removed what a remember stored, the same remember again
  is a new request, not a retry, and stores the text again. A write that
  changed nothing another write could undo is unaffected. The rule reads
  only receipts (every tool write leaves one), so background work on a
  memory (relations, re-embedding, recall's use counts) never voids one.
  A receipt that no longer stands is replaced by the new write's.

  A window key travels with the submission it belongs to
  (:meth:`IdempotencyKey.submitted`, made once per call at the edge): a message the broker
  redelivers after a worker died carries the same submission and gets its
  own receipt back whatever the window says by then (the worker may come
  back after the window, or after a later write named its memories), while a
  client's retry is a new submission, judged by the window.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import psycopg

from storage import memories as store
from storage.sealing.scope import sealing_as

from .call_keys import call_scope
from .deps import Deps

#: Receipts outlive any sane client retry or broker redelivery.
RECEIPT_TTL_S = 86_400
#: How a retry-window key starts (anything else is an operation key).
WINDOW_PREFIX = "window:"
#: Payload members whose integers are memories the result names (stored,
#: changed, forgotten, superseded); neighbours listed for information
#: (``near_duplicates``, ``previously_corrected``) are not.
_NAMING_KEYS = frozenset({"id", "memory_id", "superseded", "downweighted"})
_INFORMATIONAL = frozenset({"near_duplicates", "previously_corrected", "skipped"})
#: Share of writes that also delete expired receipts (amortised clean-up).
_PRUNE_CHANCE = 1 / 64

Work = Callable[[psycopg.AsyncConnection], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class IdempotencyKey:
    """The key a write is done at most once under, and the submission that sent it.

    ``key`` is an operation key or a retry-window key (module docstring; the
    API builds it from the call). ``submission`` is set only on a window key,
    by :meth:`submitted`, once per call: a redelivery of the same message
    carries the same submission and gets its own receipt back, a client's
    retry is a new submission, judged by the window.
    """

    key: str
    submission: str | None = None

    @property
    def is_window(self) -> bool:
        return is_window_key(self.key)

    def submitted(self) -> IdempotencyKey:
        """This key as one submission sends it: a window key gains a fresh submission id."""
        if not self.is_window:
            return self
        return replace(self, submission=uuid.uuid4().hex)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "submission": self.submission}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IdempotencyKey:
        submission = data.get("submission")
        return cls(str(data["key"]), submission if isinstance(submission, str) else None)


async def prior_receipt(
    deps: Deps, user_id: int, idempotency_key: IdempotencyKey | None
) -> dict[str, Any] | None:
    """The stored answer of this write if it already happened (checked before costly work)."""
    if idempotency_key is None:
        return None
    key, submission = idempotency_key.key, idempotency_key.submission
    # Its own keys: the queue guard looks a receipt up outside any call (a sealed answer).
    with sealing_as(await call_scope(deps, user_id)):
        async with deps.pool.connection() as conn:
            return await store.get_receipt(
                conn, user_id, key, window_s=_window(deps, key), submission=submission
            )


async def run_write(
    deps: Deps, user_id: int, label: str, idempotency_key: IdempotencyKey | None, work: Work
) -> dict[str, Any]:
    """Run ``work(conn)`` in one transaction and store its answer under the key.

    Two runs of the same key are serialised by an advisory lock; the second
    returns the first one's receipt. Without a key (dry runs) nothing is stored.
    ``label`` names the write on its receipt (the command's type name).
    """
    key = idempotency_key.key if idempotency_key else None
    submission = idempotency_key.submission if idempotency_key else None
    async with deps.pool.connection() as conn, conn.transaction():
        if key:
            await store.lock_receipt_key(conn, user_id, key)
            prior = await store.get_receipt(
                conn, user_id, key, window_s=_window(deps, key), submission=submission
            )
            if prior is not None:
                return prior
        payload = await work(conn)
        if key:
            await store.put_receipt(
                conn, user_id, key, label, payload, named_memories(payload), submission
            )
            if random.random() < _PRUNE_CHANCE:
                await store.prune_receipts(conn, older_than_s=RECEIPT_TTL_S)
        return payload


def is_window_key(idempotency_key: str) -> bool:
    """Whether a key is a retry-window key (see the module docstring)."""
    return idempotency_key.startswith(WINDOW_PREFIX)


def _window(deps: Deps, idempotency_key: str) -> int | None:
    # A window key whose window is off (0) never matches: every call writes.
    return deps.settings.idempotency_window_s if is_window_key(idempotency_key) else None


def named_memories(payload: Any) -> list[int]:
    """The memory ids a write's result names, sorted (see ``_NAMING_KEYS``)."""
    found: set[int] = set()
    stack: list[Any] = [payload]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key in _INFORMATIONAL:
                    continue
                if key in _NAMING_KEYS:
                    values = value if isinstance(value, list) else [value]
                    found.update(v for v in values if type(v) is int)
                elif isinstance(value, (dict, list)):
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return sorted(found)
