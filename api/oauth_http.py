"""Reading OAuth requests: bodies and forms (``api.http_reply`` writes the replies)."""

from __future__ import annotations

from urllib.parse import parse_qsl

import falcon.asgi

from auth.oauth_errors import OAuthError

#: Largest form or JSON body the OAuth endpoints read, in bytes.
MAX_OAUTH_BODY = 64 * 1024
FORM = "application/x-www-form-urlencoded"


def media_type(req: falcon.asgi.Request) -> str:
    return (req.content_type or "").split(";")[0].strip().lower()


async def read_body(req: falcon.asgi.Request) -> bytes:
    declared = req.content_length
    if declared is not None and declared > MAX_OAUTH_BODY:
        raise OAuthError("invalid_request", f"The body exceeds {MAX_OAUTH_BODY} bytes.")
    chunks: list[bytes] = []
    total = 0
    async for chunk in req.stream:
        total += len(chunk)
        if total > MAX_OAUTH_BODY:
            raise OAuthError("invalid_request", f"The body exceeds {MAX_OAUTH_BODY} bytes.")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_form(req: falcon.asgi.Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body; repeated parameters are refused."""
    if media_type(req) != FORM:
        raise OAuthError("invalid_request", f"Send the parameters as {FORM}.")
    body = await read_body(req)
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise OAuthError("invalid_request", "The form body is malformed.") from None
    form: dict[str, str] = {}
    for key, value in pairs:
        if key in form:
            # RFC 6749 §3.2: request parameters MUST NOT be included more than once.
            raise OAuthError("invalid_request", f"{key} must not be repeated.")
        form[key] = value
    return form
