"""OAuth clients: dynamic registration (RFC 7591) and client authentication (RFC 6749 §2.3).

Registration validates the metadata by the rules of ``auth.client_metadata``
(shared with metadata documents).

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
from auth.client_metadata import new_client, validate_metadata
from auth.oauth_errors import OAuthError, invalid_client
from auth.opaque import digest, new_secret, presentable
from storage import client_documents, oauth
from storage.oauth import ClientRow


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
                new_client(new_secret()[:32], metadata),
                client_secret_hash=None if secret is None else digest(secret),
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
