"""Messages of command format 0, as web processes of c098406 and before queued them.

Those releases sent a tool write to the ``run_use_case`` actor with the
arguments ``(tool, user_id, command, idempotency_key)``:

- ``tool`` the tool's name, which for every tool those releases queued is its
  command's type name in snake case (remember_batch for ``RememberBatch``);
- ``command`` the parsed command's JSON, tagged by that same tool name rather
  than by the command's type name;
  the shapes of the fields are those of today's commands. An even older web
  process sent the tool's raw arguments instead: they are parsed here as the
  dispatcher would;
- ``idempotency_key`` a string; a retry-window key carries its submission after
  a ``#`` (``window:...#<hex>``);

and the request id and the writer in the message options (``request_id``,
``writer``). :func:`legacy_call` turns one into today's ``(CallMeta,
Command)``, so the worker runs it through the same handler as a format-1
message, and answers with today's payload (the old web process passes it on
as it is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from config.settings import Settings
from memory.calls import CallMeta
from memory.commands import (
    COMMAND_KEY,
    Command,
    Confirm,
    FindConflicts,
    FindNearDuplicates,
    Forget,
    ForgetBatch,
    Reinforce,
    Remember,
    RememberBatch,
    UpdateMemory,
    UpdateMemoryBatch,
    from_json,
)
from memory.request_ids import accept_request_id
from memory.writers import writer_from_json
from memory.writes import WINDOW_PREFIX, IdempotencyKey

#: The actor format-0 messages name.
LEGACY_WRITE_ACTOR = "run_use_case"
#: Every command c098406 queued. Its messages name each by its tool's name, the command's
#: type name in snake case; the wire names themselves belong to the API's registry.
LEGACY_COMMANDS: frozenset[type[Command]] = frozenset(
    {
        Remember,
        RememberBatch,
        UpdateMemory,
        UpdateMemoryBatch,
        Confirm,
        Forget,
        ForgetBatch,
        Reinforce,
        FindNearDuplicates,
        FindConflicts,
    }
)
_BY_FORMAT0_NAME: dict[str, type[Command]] = {
    re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower(): cls for cls in LEGACY_COMMANDS
}
#: What separated a window key from its submission in a format-0 key.
_SUBMISSION_SEPARATOR = "#"


def legacy_call(
    tool: str,
    user_id: int,
    args: Any,
    idempotency_key: str | None,
    options: Mapping[str, Any],
    settings: Settings,
) -> tuple[CallMeta, Command]:
    """Today's meta and command for a format-0 message.

    Raises ValueError/KeyError/TypeError for a message that is not one, and
    MemoryServiceError for raw arguments the tool refuses (its documented error).
    """
    cls = _BY_FORMAT0_NAME.get(tool)
    if cls is None:
        raise ValueError(f"not a queued tool of format 0: {tool!r}")
    if not isinstance(user_id, int) or isinstance(user_id, bool):
        raise ValueError("a call's user_id is an integer")
    if isinstance(args, Mapping) and isinstance(args.get(COMMAND_KEY), str):
        if args[COMMAND_KEY] != tool:
            raise ValueError(f"a {args[COMMAND_KEY]!r} command sent as {tool!r}")
        command = from_json({**args, COMMAND_KEY: cls.type_name()})
    else:
        command = cls.parse(args, settings)
    request_id = options.get("request_id")
    meta = CallMeta(
        user_id=user_id,
        writer=writer_from_json(options.get("writer")),
        request_id=accept_request_id(request_id) if isinstance(request_id, str) else None,
        idempotency_key=_key(idempotency_key),
    )
    return meta, command


def _key(sent: str | None) -> IdempotencyKey | None:
    """A format-0 key string as today's key: ``window:...#<submission>`` split in two."""
    if not sent:
        return None
    if sent.startswith(WINDOW_PREFIX) and _SUBMISSION_SEPARATOR in sent:
        key, _, submission = sent.rpartition(_SUBMISSION_SEPARATOR)
        return IdempotencyKey(key, submission or None)
    return IdempotencyKey(sent)
