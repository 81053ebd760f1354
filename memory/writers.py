"""Which app a write speaks for: recorded on the memories it stores.

The API builds it for a tool call (``api/mcp/dispatch.py``, from the call's
context) into the call's :class:`memory.calls.CallMeta`, which a queued write
carries inside its message (``tasks/queue.py``). The one thing that reads it
is the insert of a new memory (``memory/remembering.py``), which records it on
the row (``memories.written_by_client`` / ``written_by_token``, migration
0014): the console's memory page and apps page read it there long after the
audit log has forgotten the call.

Pure standard library: ``api``, ``tasks`` and ``memory`` all reach it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The client id recorded for a write through the stdio entry point (``ownsona stdio``),
#: whose calls name no OAuth client.
STDIO_CLIENT_ID = "ownsona-stdio"
#: Longest client id or token id accepted from a message (an https client id is a URL).
_MAX_CHARS = 2048


@dataclass(frozen=True)
class Writer:
    """The app a write speaks for: its client id, and for a CLI token its jti."""

    client_id: str
    #: Set for CLI tokens only: the apps page tells one CLI token from another by it.
    token_jti: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"client_id": self.client_id, "token_jti": self.token_jti}


def writer_from_json(value: object) -> Writer | None:
    """The writer a message carries; None when it carries none, or nothing usable."""
    if not isinstance(value, Mapping):
        return None
    client_id, token_jti = value.get("client_id"), value.get("token_jti")
    if not isinstance(client_id, str) or not 0 < len(client_id) <= _MAX_CHARS:
        return None
    if token_jti is not None and (not isinstance(token_jti, str) or len(token_jti) > _MAX_CHARS):
        token_jti = None
    return Writer(client_id, token_jti)
