"""The scopes a token can carry and what they allow (SUPPLEMENT §8).

- ``memory:read``: tools annotated ``readOnlyHint: true`` (recall, search,
  listing, export, ...).
- ``memory:write``: every other tool (remember, update, forget, ...).

Scope strings are space-separated lists (RFC 6749 §3.3); order is not
meaningful, so they are kept in :data:`SUPPORTED_SCOPES` order.
"""

from __future__ import annotations

from collections.abc import Iterable

READ_SCOPE = "memory:read"
WRITE_SCOPE = "memory:write"
#: Every scope we grant, in the order documents list them.
SUPPORTED_SCOPES = (READ_SCOPE, WRITE_SCOPE)
#: What a client gets when it asks for nothing in particular.
DEFAULT_SCOPE = " ".join(SUPPORTED_SCOPES)

#: How the consent page describes each scope.
DESCRIPTIONS = {
    READ_SCOPE: "Read your memories: recall, search, list and export what you have stored.",
    WRITE_SCOPE: "Change your memories: remember new facts, update, confirm and forget them.",
}


def parse_scope(value: str | None) -> list[str]:
    """The distinct scope tokens of a scope string, in order of appearance."""
    seen: list[str] = []
    for token in (value or "").split():
        if token not in seen:
            seen.append(token)
    return seen


def canonical(scopes: Iterable[str]) -> str:
    """The known scopes among ``scopes`` as a scope string, in :data:`SUPPORTED_SCOPES` order."""
    wanted = set(scopes)
    return " ".join(s for s in SUPPORTED_SCOPES if s in wanted)


def required_scope(read_only: bool) -> str:
    """The scope a tool needs: ``memory:read`` for read-only tools, else ``memory:write``."""
    return READ_SCOPE if read_only else WRITE_SCOPE
