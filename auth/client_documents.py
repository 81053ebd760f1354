"""Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; MCP 2026-07-28).

A ``client_id`` that is an ``https`` URL with a path names its own
metadata: the JSON document at that URL. Nothing is registered in
advance; the document is fetched (``auth.metadata_fetch``, SSRF rules),
validated and cached, and its client is then treated exactly like a
registered one.

- The URL (draft §3): ``https``, a path other than ``/``, no ``.``/``..``
  segments, no fragment, no user information; at most
  :data:`auth.opaque.MAX_PRESENTED_CHARS` characters.
- The document (draft §4): a JSON object whose ``client_id`` equals the URL
  character for character, with ``client_name`` and ``redirect_uris``
  (each checked as for registration, ``auth.redirects``);
  ``token_endpoint_auth_method`` ``none`` (the default) or
  ``private_key_jwt``, which needs exactly one of ``jwks_uri`` (fetched
  under the same rules) and ``jwks``. A document carrying a
  ``client_secret`` is refused: a public document cannot hold a secret
  (draft §4.1). ``grant_types``, ``response_types``, ``scope`` and the
  echoed strings follow the registration rules (``auth.client_metadata``).
- Caching (draft §4.3 "SHOULD cache ... respecting HTTP cache headers"):
  per ``Cache-Control``/``Expires`` (:func:`auth.metadata_fetch.cache_lifetime`),
  :data:`auth.metadata_fetch.DEFAULT_TTL_S` when the response is silent, at
  most :data:`auth.metadata_fetch.MAX_TTL_S`, at most
  :data:`MAX_CACHED` documents per process (least recently used go first).
  ``no-store`` means fetched again on every use.
- Representation: each fetch rewrites the client's row in ``oauth_clients``
  (``storage.client_documents``), so codes, grants and consents reference
  it as they reference a registered client. The row is never read back
  to authorise anything: a client is always what its (cached) document says.

Any failure is ``invalid_client``: at ``/oauth/authorize`` it is shown to
the user (never redirected: the redirect URIs are unknown), at the token
endpoint it is the RFC 6749 §5.2 401 answer. Nothing is issued.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from psycopg_pool import AsyncConnectionPool

from auth.client_metadata import new_client, validate_metadata
from auth.metadata_fetch import FetchError, MetadataFetcher, url_problem
from auth.oauth_errors import OAuthError, invalid_client
from auth.opaque import MAX_PRESENTED_CHARS
from storage import client_documents
from storage.oauth import ClientRow

logger = logging.getLogger("ownsona.auth")

#: The token endpoint authentication methods a metadata document may name.
DOCUMENT_AUTH_METHODS = ("none", "private_key_jwt")
#: Documents (and JWK sets) one process keeps.
MAX_CACHED = 256
#: Largest inline ``jwks`` (keys) accepted.
MAX_KEYS = 20
#: Members a public document must not carry (draft §4.1: no shared secrets).
_FORBIDDEN = ("client_secret", "client_secret_expires_at")

#: How long a refused document stays refused, and a key set stays un-refetchable out of
#: turn, in seconds: short enough that a fixed document works again soon.
REFUSAL_TTL_S = 30.0

_T = TypeVar("_T")


def is_document_client_id(client_id: str | None) -> bool:
    """Whether ``client_id`` is to be resolved as a metadata document (it looks like an https URL)."""
    return isinstance(client_id, str) and client_id[:8].lower() == "https://"


def client_id_problem(client_id: str) -> str | None:
    """Why ``client_id`` is not a valid metadata-document URL (draft §3), or None."""
    if len(client_id) > MAX_PRESENTED_CHARS:
        return f"the client_id URL is longer than {MAX_PRESENTED_CHARS} characters"
    if any(ch <= " " or ch == "\x7f" for ch in client_id):
        return "the client_id URL must not contain spaces or control characters"
    if not client_id.isascii():
        # The consent page names the host so the user can tell claude.ai from a lookalike;
        # "сlaude.ai" with a Cyrillic "с" would read the same. A URL's own form is ASCII
        # (an international name in punycode), so nothing real is refused.
        return "the client_id URL must be ASCII (an international host name in punycode)"
    problem = url_problem(client_id)
    if problem is not None:
        return problem
    if "#" in client_id:
        return "the client_id URL must not contain a fragment"
    path = urlsplit(client_id).path
    if not path or path == "/":
        return "the client_id URL must have a path"
    if any(segment in (".", "..") for segment in path.split("/")):
        return "the client_id URL must not contain . or .. path segments"
    return None


def document_host(client_id: str) -> str:
    """The host (and port, if any) a metadata-document client is published from, lower case."""
    parts = urlsplit(client_id)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port is not None else host


def published_host(client: ClientRow) -> str | None:
    """Where a metadata-document client is published (its client_id's host); None if registered."""
    if client.document_fetched_at is None:
        return None
    return document_host(client.client_id)


def validate_document(url: str, raw: object) -> dict[str, Any]:
    """The client metadata of the document fetched from ``url``; :class:`OAuthError` when refused."""
    if not isinstance(raw, dict):
        raise _refused(url, "it is not a JSON object")
    if raw.get("client_id") != url:
        raise _refused(url, "its client_id is not exactly the URL it was fetched from")
    name = raw.get("client_name")
    if not isinstance(name, str) or not name.strip():
        raise _refused(url, "it has no client_name")
    if "redirect_uris" not in raw:
        raise _refused(url, "it has no redirect_uris")
    for member in _FORBIDDEN:
        if member in raw:
            raise _refused(url, f"it contains {member}, which a public document must not")
    try:
        metadata = validate_metadata(raw, methods=DOCUMENT_AUTH_METHODS)
    except OAuthError as ex:
        raise _refused(url, ex.description.rstrip(".")) from None
    if metadata["token_endpoint_auth_method"] == "private_key_jwt":
        jwks_uri, jwks = raw.get("jwks_uri"), raw.get("jwks")
        if (jwks_uri is None) == (jwks is None):
            raise _refused(url, "private_key_jwt needs exactly one of jwks_uri and jwks")
        if jwks_uri is not None:
            if not isinstance(jwks_uri, str) or url_problem(jwks_uri) is not None:
                raise _refused(url, "its jwks_uri is not an https URL")
            metadata["jwks_uri"] = jwks_uri
        else:
            metadata["jwks"] = _key_set(url, jwks)
    return metadata


class _Cache(Generic[_T]):
    """At most ``size`` values, each until its deadline; least recently used evicted first."""

    def __init__(self, size: int, clock: Callable[[], float]) -> None:
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, _T]] = OrderedDict()

    def get(self, key: str) -> _T | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: str, value: _T, ttl_s: float) -> None:
        self._entries.pop(key, None)
        if ttl_s <= 0:
            return
        self._entries[key] = (self._clock() + ttl_s, value)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class ClientDocuments:
    """Resolves metadata-document clients: fetch, validate, cache, and keep their rows current."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        fetcher: MetadataFetcher,
        *,
        max_cached: int = MAX_CACHED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._pool = pool
        self._fetcher = fetcher
        self._clients: _Cache[ClientRow] = _Cache(max_cached, clock)
        self._keys: _Cache[dict[str, Any]] = _Cache(max_cached, clock)
        # A refused document is refused again for a while without a fetch, and a key set
        # is fetched out of turn (an unknown kid) at most once a while: anyone can name a
        # URL at /oauth/authorize or send an assertion, and each would otherwise cost a fetch.
        self._refused: _Cache[str] = _Cache(max_cached, clock)
        self._forced: _Cache[bool] = _Cache(max_cached, clock)

    @property
    def cached(self) -> int:
        """How many documents this process holds (for tests and metrics)."""
        return len(self._clients)

    async def client(self, client_id: str) -> ClientRow:
        """The client the document at ``client_id`` describes; :class:`OAuthError` when refused."""
        problem = client_id_problem(client_id)
        if problem is not None:
            raise _refused(client_id, problem)
        cached = self._clients.get(client_id)
        if cached is not None:
            return cached
        refused = self._refused.get(client_id)
        if refused is not None:
            raise invalid_client(refused)
        try:
            return await self._resolve(client_id)
        except OAuthError as ex:
            self._refused.put(client_id, ex.description, REFUSAL_TTL_S)
            raise

    async def _resolve(self, client_id: str) -> ClientRow:
        fetched = await self._fetch(client_id)
        metadata = validate_document(client_id, fetched.body)
        async with self._pool.connection() as conn:
            row = await client_documents.upsert_document_client(
                conn, new_client(client_id, metadata)
            )
        if row is None:
            raise _refused(client_id, "a registered client already has this client_id")
        self._clients.put(client_id, row, fetched.ttl_s)
        return row

    async def keys(self, client: ClientRow, *, fresh: bool = False) -> dict[str, Any]:
        """The JWK set of a ``private_key_jwt`` client: inline, or from its ``jwks_uri``.

        ``fresh`` skips the cache (a key id we do not know may be a key the
        client just rotated in).
        """
        inline = client.metadata.get("jwks")
        if isinstance(inline, dict):
            return inline
        uri = client.metadata.get("jwks_uri")
        if not isinstance(uri, str):
            raise invalid_client("This client's metadata document names no keys.")
        if fresh and self._forced.get(uri):
            fresh = False  # fetched out of turn a moment ago: the cached set stands
        cached = None if fresh else self._keys.get(uri)
        if cached is not None:
            return cached
        if fresh:
            self._forced.put(uri, True, REFUSAL_TTL_S)
        fetched = await self._fetch(uri, what="JWK set")
        keys = _key_set(uri, fetched.body, what="JWK set")
        self._keys.put(uri, keys, fetched.ttl_s)
        return keys

    async def _fetch(self, url: str, what: str = "metadata document") -> Any:
        try:
            return await self._fetcher.fetch_json(url)
        except FetchError as ex:
            logger.warning("client %s at %r refused: %s", what, url, ex)
            raise _refused(url, str(ex), what=what) from None


def _key_set(url: str, raw: object, what: str = "metadata document") -> dict[str, Any]:
    keys = raw.get("keys") if isinstance(raw, dict) else None
    if not isinstance(keys, list) or not keys or len(keys) > MAX_KEYS:
        raise _refused(url, f"its JWK set must list 1 to {MAX_KEYS} keys", what=what)
    if not all(isinstance(k, dict) for k in keys):
        raise _refused(url, "its JWK set lists something that is not a key", what=what)
    return {"keys": keys}


def _refused(url: str, reason: str, what: str = "metadata document") -> OAuthError:
    return invalid_client(f"The client's {what} at {url} cannot be used: {reason}.")
