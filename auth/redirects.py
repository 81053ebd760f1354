"""Redirect-URI rules (OAuth 2.1 §2.3.1, §4.1.3; RFC 8252 §7.3, §8.3). Pure functions.

- Registration: an absolute ``https`` URI, or ``http`` on a loopback host
  (``localhost``, ``127.0.0.1``, ``[::1]``), for native clients such as
  Claude Code and the MCP Inspector. No fragment (RFC 6749 §3.1.2), no
  user information.
- Authorization requests: the ``redirect_uri`` must equal one of the
  registered URIs character for character (SUPPLEMENT §8). No
  normalisation, no prefix matching: those are how redirect checks get
  bypassed. One exception, RFC 8252 §7.3: a registered ``http`` URI on a
  loopback host (``127.0.0.1``, ``[::1]``, ``localhost``) matches the same
  URI with any port, because a native app (Claude Code) listens on an
  ephemeral port it cannot know in advance. Scheme, host, path and query
  must still be identical, and the host is not swapped for another
  loopback name. ``localhost`` by name is matched the same way as the two
  IP literals: RFC 8252 §8.3 only advises against it, and native clients
  (the MCP Inspector, SDK examples) register it. The token request must
  repeat the authorization request's ``redirect_uri`` exactly (port
  included; ``auth.grants``).
- A URI holding white space or a control character anywhere (a trailing
  newline, ``%0A`` once decoded, a leading space, a tab) is never registered
  and never matches: Python's URL parser drops tabs and newlines and strips
  leading spaces, so the loopback comparison, which parses, would otherwise
  find a match for a URI that is not the one registered.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: Longest redirect URI we store.
MAX_URI_CHARS = 2000


def redirect_uri_problem(uri: object) -> str | None:
    """Why ``uri`` cannot be registered as a redirect URI, or None when it can."""
    if not isinstance(uri, str) or not uri:
        return "redirect_uris must be a list of absolute URIs."
    if len(uri) > MAX_URI_CHARS:
        return f"A redirect URI has at most {MAX_URI_CHARS} characters."
    if has_unsafe_characters(uri):
        return "A redirect URI must not contain spaces or control characters."
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return f"{uri!r} is not a valid URI."
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if parts.fragment or "#" in uri:
        return f"{uri!r}: a redirect URI must not contain a fragment."
    if not host:
        return f"{uri!r}: a redirect URI must be absolute, with a host."
    if parts.username is not None or parts.password is not None:
        return f"{uri!r}: a redirect URI must not contain user information."
    if scheme == "https":
        return None
    if scheme == "http" and host in LOOPBACK_HOSTS:
        return None
    if scheme == "http":
        return f"{uri!r}: http is allowed only on a loopback host (localhost, 127.0.0.1, [::1])."
    return f"{uri!r}: a redirect URI must use https (or http on a loopback host)."


def has_unsafe_characters(uri: str) -> bool:
    """Whether ``uri`` holds white space or a control character (ASCII or not) anywhere."""
    return any(ch <= " " or ch == "\x7f" or not ch.isprintable() for ch in uri)


def is_registered(requested: str, registered: Sequence[str]) -> bool:
    """Exact match against the registered URIs, any port for a loopback one (RFC 8252 §7.3)."""
    if has_unsafe_characters(requested):
        return False  # never matched, even if registered so (checked before the parsing below)
    if requested in registered:
        return True
    key = _loopback_key(requested)
    return key is not None and any(_loopback_key(uri) == key for uri in registered)


def is_loopback(uri: str) -> bool:
    """True for an ``http`` redirect to this machine (127.0.0.1, [::1], localhost), any port."""
    return _loopback_key(uri) is not None


def _loopback_key(uri: str) -> tuple[str, str, str] | None:
    """(host, path, query) of an ``http`` loopback URI, the port left out; None for any other URI.

    Compared as written (not lower-cased, not decoded): only the port may differ.
    """
    if not uri.startswith("http://") or "#" in uri or "@" in uri:
        return None
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return None
    netloc = parts.netloc
    if netloc.startswith("["):
        host, bracket, rest = netloc.partition("]")
        host += bracket
    else:
        host, _, rest = netloc.partition(":")
        rest = ":" + rest if rest else ""
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    if host not in ("127.0.0.1", "[::1]", "localhost"):
        return None
    return host, parts.path, parts.query


def with_params(uri: str, params: dict[str, str]) -> str:
    """``uri`` with ``params`` added to its query, keeping the query it already has.

    RFC 6749 §3.1.2: the redirection endpoint URI MAY include a query
    component, which MUST be retained when adding parameters.
    """
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query.extend((k, v) for k, v in params.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def origin_of(uri: str) -> str:
    """``scheme://host[:port]`` of an absolute URI (for a Content-Security-Policy source)."""
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"
