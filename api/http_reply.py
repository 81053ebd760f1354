"""Writing an :class:`~api.errors.HttpReply` onto a Falcon response.

One writer for every endpoint that answers with an ``HttpReply`` (the MCP
endpoint and the OAuth endpoints); each passes the JSON encoder its
protocol wants.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import falcon.asgi

from api.errors import HttpReply


def json_bytes(body: Any) -> bytes:
    """Plain ``json.dumps`` as bytes: the OAuth endpoints' encoding."""
    return json.dumps(body).encode()


def send(
    resp: falcon.asgi.Response,
    reply: HttpReply,
    *,
    encode: Callable[[Any], bytes] = json_bytes,
) -> None:
    """Set ``resp`` to ``reply``: status, headers and the JSON body (or an empty one).

    The body is encoded before anything is set, so an encoder that raises
    leaves ``resp`` untouched for the caller's fallback answer.
    """
    data = None if reply.body is None else encode(reply.body)
    resp.status = reply.status
    for name, value in reply.headers.items():
        resp.set_header(name, value)
    if data is None:
        resp.data = b""
        resp.content_type = None
    else:
        resp.data = data
        resp.content_type = "application/json"
