"""Which app a write speaks for, carried beside the write the way the request id is.

The API sets it for a tool call (``api/mcp/dispatch.py``, from the call's
context); a queued write carries it in its Dramatiq message options
(``tasks/queue.py``) and the worker sets it again while it runs that message
(``tasks/actors.py``). The one thing that reads it is the insert of a new
memory (``memory/remembering.py``), which records it on the row
(``memories.written_by_client`` / ``written_by_token``, migration 0014): the
console's memory page and apps page read it there long after the audit log has
forgotten the call. A message queued without it (by an older web process) runs
as before and stores a row whose writer is not recorded.

Pure standard library: ``api``, ``tasks`` and ``memory`` all reach it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

#: The client id recorded for a write through the stdio entry point (``ownsona stdio``),
#: whose calls name no OAuth client.
STDIO_CLIENT_ID = "ownsona-stdio"
#: The message option a queued write's writer rides in.
OPTION = "writer"
#: Longest client id or token id accepted from a message (an https client id is a URL).
_MAX_CHARS = 2048


@dataclass(frozen=True)
class Writer:
    """The app a write speaks for: its client id, and for a CLI token its jti."""

    client_id: str
    #: Set for CLI tokens only: the apps page tells one CLI token from another by it.
    token_jti: str | None = None


writer_var: ContextVar[Writer | None] = ContextVar("ownsona_writer", default=None)


def current_writer() -> Writer | None:
    return writer_var.get()


@contextmanager
def writing_as(writer: Writer | None) -> Iterator[None]:
    """``writer`` is the current writer inside the block (None: not recorded)."""
    token = writer_var.set(writer)
    try:
        yield
    finally:
        writer_var.reset(token)


def to_options(writer: Writer | None) -> dict[str, Any]:
    """The message options that carry ``writer`` (none when there is none)."""
    if writer is None:
        return {}
    return {OPTION: {"client_id": writer.client_id, "token_jti": writer.token_jti}}


def from_options(options: Mapping[str, Any]) -> Writer | None:
    """The writer a message carries; None when it carries none, or nothing usable."""
    value = options.get(OPTION)
    if not isinstance(value, Mapping):
        return None
    client_id, token_jti = value.get("client_id"), value.get("token_jti")
    if not isinstance(client_id, str) or not 0 < len(client_id) <= _MAX_CHARS:
        return None
    if token_jti is not None and (not isinstance(token_jti, str) or len(token_jti) > _MAX_CHARS):
        token_jti = None
    return Writer(client_id, token_jti)
