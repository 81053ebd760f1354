"""Which browser origins may talk to ``/mcp``, and the CORS headers for them.

MCP Streamable HTTP, "Security Warning": servers MUST validate the
``Origin`` header to stop DNS-rebinding attacks, answering 403 when it is
present and not allowed. Allowed: the public URL's own origin, loopback
origins on any port (local tools such as the MCP Inspector), and the
origins listed in ``settings.allowed_origins`` once that setting exists
(``OWNSONA_ALLOWED_ORIGINS``; read with ``getattr`` so this module works
before and after it is added). Requests without ``Origin`` (every non-browser
client) pass. The bearer token is never ambient (no cookies), so CORS
decides only which pages may *read* our answers.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from config.settings import Settings

_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_DEFAULT_PORTS = {"http": 80, "https": 443}

#: Methods a browser may use on /mcp (GET answers 405, but is part of the transport).
ALLOW_METHODS = "POST, GET, DELETE, OPTIONS"
#: Request headers an MCP client sends (MCP Streamable HTTP; Idempotency-Key is ours).
ALLOW_HEADERS = (
    "authorization, content-type, accept, mcp-protocol-version, mcp-session-id, "
    "last-event-id, idempotency-key"
)
#: Response headers a browser client must be able to read.
EXPOSE_HEADERS = "mcp-session-id, www-authenticate"
#: How long a browser may cache a preflight answer, in seconds.
MAX_AGE_S = 86400

Origin = tuple[str, str, int]


class OriginPolicy:
    """Decides whether an ``Origin`` header value is allowed."""

    def __init__(self, settings: Settings) -> None:
        own = _parse(settings.public_url)
        extra = getattr(settings, "allowed_origins", ()) or ()
        self._allowed = frozenset(o for o in (own, *map(_parse, extra)) if o is not None)

    def allows(self, origin: str | None) -> bool:
        """True when there is no Origin header or it is an allowed origin."""
        if origin is None:
            return True
        parsed = _parse(origin)
        if parsed is None:
            return False  # "null" and anything unparsable
        scheme, host, _port = parsed
        return parsed in self._allowed or (scheme in _DEFAULT_PORTS and host in _LOOPBACK_HOSTS)


def preflight_headers(origin: str) -> dict[str, str]:
    """The answer to an allowed CORS preflight (Fetch standard, "CORS protocol")."""
    return {
        **response_headers(origin),
        "Access-Control-Allow-Methods": ALLOW_METHODS,
        "Access-Control-Allow-Headers": ALLOW_HEADERS,
        "Access-Control-Max-Age": str(MAX_AGE_S),
    }


def response_headers(origin: str) -> dict[str, str]:
    """CORS headers for an actual response to an allowed origin."""
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Expose-Headers": EXPOSE_HEADERS,
        "Vary": "Origin",
    }


class McpCors:
    """Falcon middleware: CORS headers on every /mcp response to an allowed origin.

    Runs for error responses too, so a browser client can read the 401's
    ``WWW-Authenticate`` and start the OAuth flow.
    """

    def __init__(self, policy: OriginPolicy, path: str = "/mcp") -> None:
        self._policy = policy
        self._path = path

    async def process_response(
        self, req: Any, resp: Any, resource: Any, req_succeeded: bool
    ) -> None:
        origin = req.get_header("Origin")
        if origin is None or req.path.rstrip("/") != self._path or not self._policy.allows(origin):
            return
        for name, value in response_headers(origin).items():
            if resp.get_header(name) is None:
                resp.set_header(name, value)


def _parse(origin: str) -> Origin | None:
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]
