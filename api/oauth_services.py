"""The OAuth collaborators the ``/oauth/*`` resources share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from psycopg_pool import AsyncConnectionPool

from auth.client_documents import ClientDocuments
from auth.clients import Clients
from auth.consents import Consents
from auth.grants import Grants
from auth.keys import KeyStore
from auth.metadata_fetch import MetadataFetcher
from auth.sessions import SESSION_TTL_S, Sessions
from auth.throttle import LoginGuard, ThrottlePolicy
from config.settings import Settings


@dataclass(frozen=True)
class OAuthOptions:
    """Knobs for tests and operators; the defaults are the documented policy."""

    throttle: ThrottlePolicy = field(default_factory=ThrottlePolicy)
    #: The throttle's clock (UTC); None means the wall clock.
    clock: Callable[[], datetime] | None = None
    session_ttl_s: int = SESSION_TTL_S


class OAuthServices:
    """The ``auth`` use cases the ``/oauth/*`` resources share, built once by ``create_app``.

    They hold the pool and key store, which the process opens at startup
    (before the first request) and closes at shutdown. ``fetcher`` fetches
    client ID metadata documents (its owner closes it); without one, such
    client ids are refused.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool,
        keystore: KeyStore,
        settings: Settings,
        options: OAuthOptions,
        fetcher: MetadataFetcher | None = None,
    ) -> None:
        self.settings = settings
        issuer = settings.issuer
        self.documents = None if fetcher is None else ClientDocuments(pool, fetcher)
        self.clients = Clients(
            pool,
            self.documents,
            # RFC 7523 §3 item 3: the assertion's audience is this authorization server.
            audiences=(issuer, f"{issuer}/oauth/token", f"{issuer}/oauth/revoke"),
        )
        self.grants = Grants(pool, keystore, settings)
        self.guard = LoginGuard(pool, options.throttle, options.clock)
        self.sessions = Sessions(pool, options.session_ttl_s)
        self.consents = Consents(pool, self.grants)
