"""The id of the request being served, carried in a context variable.

The web edge sets it for each HTTP request (from a sane ``X-Request-Id``
header, else a fresh one); a queued write carries it in its Dramatiq message
options, and the worker sets it again while it runs that message. Log lines
read it, so every line about one request, in any process, shares its id.

Pure standard library: ``api``, ``tasks`` and the logging setup all reach it.
"""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar

#: The request id of the work in progress in this context, or None outside a request.
request_id_var: ContextVar[str | None] = ContextVar("ownsona_request_id", default=None)

#: What we accept from a client: short, printable, no spaces, nothing a log parser trips on.
_SANE = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")


def current_request_id() -> str | None:
    return request_id_var.get()


def new_request_id() -> str:
    return uuid.uuid4().hex


def accept_request_id(value: str | None) -> str | None:
    """``value`` if it is a usable request id, else None (the caller makes a new one).

    An id from outside is echoed in headers and logs: anything long, with
    spaces, quotes or control characters could forge log fields or headers.
    """
    if value is None:
        return None
    value = value.strip()
    return value if _SANE.fullmatch(value) else None
