"""Who a command runs for and how: the call's metadata, built once at the edge.

Every handler (``memory.handlers``) is given a :class:`CallMeta` beside its
command. The entry point builds it (the MCP dispatcher for HTTP, stdio and
the console; a CLI command for its own writes); a queued command carries it
inside its message as JSON (:meth:`CallMeta.to_json`), and the worker passes
the decoded value on. Nothing of it travels in a context variable: the
request id is also set as the logging context (``memory.request_ids``) on
each side, for log lines only.

The meta's JSON also says which version of the queued command format the
message is in (``"format"``, :data:`COMMAND_FORMAT`), so a worker can tell a
message it reads from one it must refuse. The policy (docs/upgrading.md):

- a worker runs messages of its own format and of the one before it, so
  a web process of the previous release keeps working against new workers;
- the format number changes only when the shape of a message changes in a
  way the previous release's worker could not read; a release that changes it
  keeps reading the old one for one more release;
- workers are upgraded before web processes: a worker that meets a newer
  format answers so, naming the reason, and runs nothing.

Formats so far: 0, the ``run_use_case`` actor of c098406 and before (tool
name, user id, command JSON tagged by tool name, idempotency key
``key#submission``; request id and writer in the message options; read by
``tasks.legacy_messages``); 1, the ``run_command`` actor (this meta, the
command tagged by its type name), queued by 6540e3c without a ``"format"``
member, which therefore reads as 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .request_ids import accept_request_id
from .writers import Writer, writer_from_json
from .writes import IdempotencyKey

#: The queued command format this release writes (module docstring).
COMMAND_FORMAT = 1
#: The oldest format this release's workers still run.
OLDEST_READ_FORMAT = 0
#: The format of a meta that names none (6540e3c wrote none).
_UNNAMED_FORMAT = 1


def format_of(data: Mapping[str, Any]) -> int:
    """The command format a queued meta says it is in; ValueError for a malformed one."""
    value = data.get("format", _UNNAMED_FORMAT)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("a call's format is a non-negative integer")
    return value


@dataclass(frozen=True)
class CallMeta:
    """The user a command runs for, the app it speaks for, its request and its key."""

    user_id: int
    #: The app a write speaks for, recorded on the memories it stores; None: not recorded.
    writer: Writer | None = None
    #: The request the call came in (log lines carry it, in every process).
    request_id: str | None = None
    #: A write's idempotency key (``memory.writes``); None: nothing recognises a retry.
    idempotency_key: IdempotencyKey | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": COMMAND_FORMAT,
            "user_id": self.user_id,
            "writer": self.writer.to_json() if self.writer is not None else None,
            "request_id": self.request_id,
            "idempotency_key": self.idempotency_key.to_json()
            if self.idempotency_key is not None
            else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CallMeta:
        """The meta :meth:`to_json` wrote; KeyError/ValueError for anything else."""
        user_id = data["user_id"]
        if not isinstance(user_id, int) or isinstance(user_id, bool):
            raise ValueError("a call's user_id is an integer")
        key = data.get("idempotency_key")
        request_id = data.get("request_id")
        return cls(
            user_id=user_id,
            writer=writer_from_json(data.get("writer")),
            request_id=accept_request_id(request_id) if isinstance(request_id, str) else None,
            idempotency_key=IdempotencyKey.from_json(key) if isinstance(key, Mapping) else None,
        )
