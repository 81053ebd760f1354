"""OAuth clients: dynamic registration (RFC 7591) and client authentication (RFC 6749 §2.3).

Registration decisions (what real MCP clients send is accepted):

- ``redirect_uris`` is required; each must pass :func:`auth.redirects.redirect_uri_problem`.
- ``token_endpoint_auth_method`` defaults to ``none`` (a public client that
  proves itself with PKCE), not RFC 7591's ``client_secret_basic``: MCP
  clients (Claude, ChatGPT, Claude Code, the Inspector, the SDKs) are
  native or browser apps that cannot keep a secret and mostly omit the
  field. ``client_secret_basic`` and ``client_secret_post`` get a secret,
  returned once in the 201 answer and stored only as a digest; it does not expire.
- ``grant_types`` defaults to ``authorization_code`` + ``refresh_token``;
  ``authorization_code`` is required and nothing else is supported.
  ``response_types`` defaults to and must be ``["code"]``.
- ``scope``: scopes we do not know are dropped (RFC 7591 §2 lets the
  server replace values); nothing left, or no scope at all, registers every
  scope we support. What a token finally carries is decided at consent.
- ``client_name``, ``application_type`` (``web``/``native``), ``client_uri``,
  ``logo_uri``, ``tos_uri``, ``policy_uri``, ``contacts``, ``software_id``,
  ``software_version`` are kept and echoed; other members are ignored.

Client authentication at the token and revocation endpoints: a client
with a secret must present it, by HTTP Basic or in the body, and may use
either whatever it registered; a public client sends only ``client_id``;
a ``private_key_jwt`` client (only metadata-document clients are) must send
a signed ``client_assertion`` (``auth.client_assertions``), each accepted once.

A ``client_id`` that is an https URL is a Client ID Metadata Document
client (``auth.client_documents``): it is resolved from its document, never
from a registration.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from psycopg_pool import AsyncConnectionPool

from auth.client_assertions import (
    ASSERTION_TYPE,
    UnknownKey,
    unverified_issuer,
    verify_assertion,
)
from auth.client_documents import ClientDocuments, is_document_client_id
from auth.oauth_errors import OAuthError, invalid_client
from auth.opaque import digest, new_secret, presentable
from auth.redirects import redirect_uri_problem
from auth.scopes import DEFAULT_SCOPE, canonical, parse_scope
from storage import client_documents, oauth
from storage.oauth import ClientRow

AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
GRANT_TYPES = ("authorization_code", "refresh_token")
DEFAULT_AUTH_METHOD = "none"
MAX_REDIRECT_URIS = 20
MAX_NAME_CHARS = 200
_ECHOED_STRINGS = (
    "client_uri",
    "logo_uri",
    "tos_uri",
    "policy_uri",
    "software_id",
    "software_version",
)


@dataclass(frozen=True)
class Registration:
    """A stored client plus its one-time secret (None for public clients)."""

    client: ClientRow
    client_secret: str | None

    def response(self) -> dict[str, Any]:
        """The RFC 7591 §3.2.1 client information response."""
        body: dict[str, Any] = {
            "client_id": self.client.client_id,
            "client_id_issued_at": int(self.client.created_at.timestamp()),
            **self.client.metadata,
        }
        if self.client_secret is not None:
            body["client_secret"] = self.client_secret
            body["client_secret_expires_at"] = 0  # never
        return body


def validate_metadata(raw: object, methods: Sequence[str] = AUTH_METHODS) -> dict[str, Any]:
    """The client metadata we register for a request body; :class:`OAuthError` when refused.

    ``methods``: the token endpoint authentication methods allowed (a
    metadata document has its own, ``auth.client_documents``).
    """
    if not isinstance(raw, dict):
        raise _metadata("The registration request must be a JSON object.")
    uris = raw.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        raise OAuthError("invalid_redirect_uri", "redirect_uris must be a non-empty list of URIs.")
    if len(uris) > MAX_REDIRECT_URIS:
        raise OAuthError("invalid_redirect_uri", f"At most {MAX_REDIRECT_URIS} redirect URIs.")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem is not None:
            raise OAuthError("invalid_redirect_uri", problem)

    method = raw.get("token_endpoint_auth_method")
    if method is None:
        method = DEFAULT_AUTH_METHOD
    if method not in methods:
        raise _metadata(f"token_endpoint_auth_method must be one of {', '.join(methods)}.")

    grant_types = _string_list(raw, "grant_types", list(GRANT_TYPES))
    unsupported = [g for g in grant_types if g not in GRANT_TYPES]
    if unsupported or "authorization_code" not in grant_types:
        raise _metadata(
            "grant_types may only be authorization_code and refresh_token, "
            "and must include authorization_code."
        )
    response_types = _string_list(raw, "response_types", ["code"])
    if response_types != ["code"]:
        raise _metadata('response_types must be ["code"].')

    scope_value = raw.get("scope")
    if scope_value is not None and not isinstance(scope_value, str):
        raise _metadata("scope must be a space-separated string.")
    scope = canonical(parse_scope(scope_value)) or DEFAULT_SCOPE

    name = raw.get("client_name")
    if name is not None:
        if not isinstance(name, str):
            raise _metadata("client_name must be a string.")
        name = "".join(ch for ch in name if ch.isprintable()).strip()[:MAX_NAME_CHARS] or None
    app_type = raw.get("application_type")
    if app_type is not None and app_type not in ("web", "native"):
        raise _metadata("application_type must be web or native.")

    metadata: dict[str, Any] = {
        "redirect_uris": list(dict.fromkeys(uris)),
        "token_endpoint_auth_method": method,
        "grant_types": list(dict.fromkeys(grant_types)),
        "response_types": ["code"],
        "scope": scope,
    }
    if name is not None:
        metadata["client_name"] = name
    if app_type is not None:
        metadata["application_type"] = app_type
    for key in _ECHOED_STRINGS:
        value = raw.get(key)
        if isinstance(value, str) and 0 < len(value) <= 2000:
            metadata[key] = value
    contacts = raw.get("contacts")
    if isinstance(contacts, list) and all(isinstance(c, str) for c in contacts):
        metadata["contacts"] = contacts[:10]
    return metadata


@dataclass(frozen=True)
class ClientCredentials:
    """What a token or revocation request presented to identify its client."""

    client_id: str | None
    client_secret: str | None
    basic: bool = False
    #: A ``private_key_jwt`` assertion (RFC 7523 §2.2), when one was sent.
    assertion: str | None = None


def client_credentials(form: dict[str, str], authorization: str | None) -> ClientCredentials:
    """Credentials from ``Authorization: Basic`` (RFC 6749 §2.3.1), the form body, or a JWT.

    Presenting a secret both ways, or a secret and an assertion, is refused:
    a client MUST NOT use more than one authentication method per request
    (RFC 6749 §2.3). With an assertion, ``client_id`` may be left out (RFC
    7521 §4.2): the assertion's ``iss`` names the client, and is verified.
    """
    body_id = form.get("client_id") or None
    body_secret = form.get("client_secret")
    assertion_type = form.get("client_assertion_type")
    assertion = form.get("client_assertion")
    if assertion_type is not None or assertion is not None:
        if assertion_type != ASSERTION_TYPE:
            raise invalid_client(f"client_assertion_type must be {ASSERTION_TYPE}.")
        if not assertion:
            raise invalid_client("client_assertion is required with client_assertion_type.")
        if body_secret is not None or (authorization is not None and authorization.strip()):
            raise OAuthError("invalid_request", "Use one client authentication method, not two.")
        return ClientCredentials(body_id or unverified_issuer(assertion), None, assertion=assertion)
    if authorization is None or not authorization.strip():
        return ClientCredentials(body_id, body_secret)
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        raise invalid_client("Use HTTP Basic or client_id/client_secret in the body.")
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise invalid_client("Malformed HTTP Basic credentials.", basic_auth=True) from None
    raw_id, sep, raw_secret = decoded.partition(":")
    if not sep:
        raise invalid_client("Malformed HTTP Basic credentials.", basic_auth=True)
    # RFC 6749 §2.3.1: both parts are form-urlencoded before Basic encoding.
    basic_id = unquote(raw_id.replace("+", " "))
    basic_secret = unquote(raw_secret.replace("+", " "))
    if body_secret is not None:
        raise OAuthError("invalid_request", "Use one client authentication method, not two.")
    if body_id is not None and body_id != basic_id:
        raise invalid_client("client_id differs from the HTTP Basic user.", basic_auth=True)
    return ClientCredentials(basic_id, basic_secret, basic=True)


class Clients:
    """The clients: registration, lookup and authentication, over the pool.

    ``documents`` resolves metadata-document clients (None: such client ids
    are refused); ``audiences`` are the names an assertion's ``aud`` may use
    for this server (the issuer and its token and revocation endpoints).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool,
        documents: ClientDocuments | None = None,
        audiences: Sequence[str] = (),
    ) -> None:
        self._pool = pool
        self._documents = documents
        self._audiences = frozenset(audiences)

    async def register(self, raw: object) -> Registration:
        """Validate and store a client (RFC 7591 §3.1); its secret is in the result only."""
        metadata = validate_metadata(raw)
        method = metadata["token_endpoint_auth_method"]
        secret = None if method == "none" else new_secret()
        async with self._pool.connection() as conn:
            row = await oauth.insert_client(
                conn,
                client_id=new_secret()[:32],
                client_secret_hash=None if secret is None else digest(secret),
                client_name=metadata.get("client_name"),
                redirect_uris=metadata["redirect_uris"],
                grant_types=metadata["grant_types"],
                response_types=metadata["response_types"],
                scope=metadata["scope"],
                token_endpoint_auth_method=method,
                application_type=metadata.get("application_type"),
                metadata=metadata,
            )
        return Registration(row, secret)

    async def find(self, client_id: str | None) -> ClientRow | None:
        """The client ``client_id`` names; None for no id or one we never issued.

        A metadata-document client id is resolved from its document, and
        raises :class:`OAuthError` ``invalid_client`` when that fails.
        """
        if not presentable(client_id):
            return None
        if is_document_client_id(client_id):
            if self._documents is None:
                raise invalid_client("This server does not accept client ID metadata documents.")
            return await self._documents.client(client_id)
        async with self._pool.connection() as conn:
            return await oauth.get_client(conn, client_id)

    async def authenticate(self, creds: ClientCredentials) -> ClientRow:
        """The client the credentials prove; :class:`OAuthError` ``invalid_client`` (401) otherwise."""
        if not presentable(creds.client_id):
            raise invalid_client("client_id is required.", basic_auth=creds.basic)
        client = await self.find(creds.client_id)
        if client is None:
            raise invalid_client("Unknown client.", basic_auth=creds.basic)
        if client.token_endpoint_auth_method == "private_key_jwt":
            if creds.assertion is None:
                raise invalid_client(
                    "This client authenticates with private_key_jwt: send client_assertion "
                    f"and client_assertion_type={ASSERTION_TYPE}.",
                    basic_auth=creds.basic,
                )
            await self._verify_assertion(client, creds.assertion)
            return client
        if creds.assertion is not None:
            raise invalid_client("This client does not authenticate with private_key_jwt.")
        return _proven(client, creds)

    async def _verify_assertion(self, client: ClientRow, assertion: str) -> None:
        """Check the assertion against the client's keys and accept its jti once."""
        assert self._documents is not None  # only document clients use private_key_jwt
        fresh = False
        while True:
            keys = await self._documents.keys(client, fresh=fresh)
            try:
                verified = verify_assertion(
                    assertion,
                    keys,
                    client_id=client.client_id,
                    audiences=self._audiences,
                    now=time.time(),
                )
            except UnknownKey:
                if fresh or "jwks_uri" not in client.metadata:
                    raise
                fresh = True  # the client may have rotated its keys since we cached them
                continue
            break
        until = datetime.fromtimestamp(verified.valid_until, UTC)
        async with self._pool.connection() as conn:
            first_use = await client_documents.record_assertion(
                conn, client.client_id, verified.jti, until
            )
        if not first_use:
            raise invalid_client("This client_assertion was already used; sign a new one.")


def _proven(client: ClientRow, creds: ClientCredentials) -> ClientRow:
    """``client`` when ``creds`` carry exactly the secret it needs (none for a public one)."""
    if client.client_secret_hash is None:
        if creds.client_secret:
            raise invalid_client(
                "This is a public client: send no client_secret.", basic_auth=creds.basic
            )
        return client
    secret = creds.client_secret
    if not presentable(secret):
        raise invalid_client(
            "This client must authenticate with its client_secret.", basic_auth=creds.basic
        )
    if not hmac.compare_digest(digest(secret), client.client_secret_hash):
        raise invalid_client("Client authentication failed.", basic_auth=creds.basic)
    return client


def _string_list(raw: dict[str, Any], key: str, default: list[str]) -> list[str]:
    value = raw.get(key)
    if value is None:
        return default
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or not value:
        raise _metadata(f"{key} must be a non-empty list of strings.")
    return value


def _metadata(description: str) -> OAuthError:
    return OAuthError("invalid_client_metadata", description)
