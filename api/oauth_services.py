"""The OAuth collaborators the ``/oauth/*`` resources share, built once the runtime exists."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import falcon

from api.runtime import Runtime
from auth.clients import Clients
from auth.consents import Consents
from auth.grants import Grants
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


@dataclass(frozen=True)
class Collaborators:
    """The ``auth`` use cases over one runtime's pool and key store."""

    runtime: Runtime
    clients: Clients
    grants: Grants
    guard: LoginGuard
    sessions: Sessions
    consents: Consents


class OAuthServices:
    """Builds the OAuth collaborators from the runtime once it exists (after startup)."""

    def __init__(
        self, runtime: Callable[[], Runtime | None], settings: Settings, options: OAuthOptions
    ) -> None:
        self._runtime = runtime
        self.settings = settings
        self._options = options
        self._built: Collaborators | None = None

    def get(self) -> Collaborators:
        runtime = self._runtime()
        if runtime is None:
            raise falcon.HTTPServiceUnavailable(
                description="The server is starting.", retry_after=1
            )
        if self._built is None or self._built.runtime is not runtime:
            pool = runtime.deps.pool
            grants = Grants(pool, runtime.keystore, self.settings)
            self._built = Collaborators(
                runtime,
                Clients(pool),
                grants,
                LoginGuard(pool, self._options.throttle, self._options.clock),
                Sessions(pool, self._options.session_ttl_s),
                Consents(pool, grants),
            )
        return self._built
