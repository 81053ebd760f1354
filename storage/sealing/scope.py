"""The user whose keys a call runs with: set once at the use cases' boundary, read by storage.

``memory.handlers.dispatch`` opens the caller's keys and runs the handler inside
:func:`sealing_as`; storage then seals what it writes for that user and opens what
it reads (``storage.sealed_rows``). A context variable, like the logging context's
request id: every statement of the call sees it, no signature changes. Keys in
scope for one user never open another user's row (:func:`keys_for` refuses).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from .errors import SealedValueError
from .user_keys import UserKeys


@dataclass(frozen=True)
class Scope:
    """A call's keys, and whether its writes seal (else they stay plain, as before).

    ``readable``: more users' keys, for an operator's read across users (``ownsona
    export``); a tool call never has any.
    """

    keys: UserKeys | None
    seal_writes: bool
    readable: Mapping[int, UserKeys] = field(default_factory=dict)


_current: ContextVar[Scope | None] = ContextVar("ownsona_sealing_scope", default=None)


@contextmanager
def sealing_as(scope: Scope | None) -> Iterator[None]:
    token = _current.set(scope)
    try:
        yield
    finally:
        _current.reset(token)


def keys_for(user_id: int) -> UserKeys | None:
    """The keys in scope, which must be ``user_id``'s; None when the call has none."""
    scope = _current.get()
    if scope is None:
        return None
    if scope.keys is not None and scope.keys.user_id == user_id:
        return scope.keys
    if user_id in scope.readable:
        return scope.readable[user_id]
    owner = scope.keys.user_id if scope.keys is not None else "no one"
    raise SealedValueError(f"the keys of this call are user {owner}'s, not user {user_id}'s")


def sealing_writes(user_id: int) -> UserKeys | None:
    """The keys to seal ``user_id``'s writes with; None: write plain."""
    scope = _current.get()
    if scope is None or not scope.seal_writes or scope.keys is None:
        return None
    return keys_for(user_id)
