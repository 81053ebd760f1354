"""Consent and codes for a signed-in user (OAuth 2.1 §4.1.1; SUPPLEMENT §8).

A user who once allowed a client a scope is not asked again for that
scope or less (unless the request says ``prompt=consent``): the code is
issued at once. Reading the stored consent and issuing the code share one
transaction, as do storing a new consent and its code.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from auth.authorize import AuthorizationRequest, consent_given
from auth.grants import Grants
from storage import oauth, users


@dataclass(frozen=True)
class IssuedCode:
    """The user had allowed this already: redirect with ``code``."""

    code: str


@dataclass(frozen=True)
class AskConsent:
    """Show the consent page to ``username``."""

    username: str


class Consents:
    """What users allowed which clients, and the codes that follow from it."""

    def __init__(self, pool: AsyncConnectionPool, grants: Grants) -> None:
        self._pool = pool
        self._grants = grants

    async def code_or_question(
        self, request: AuthorizationRequest, user_id: int
    ) -> IssuedCode | AskConsent:
        """A code when ``user_id`` already allowed ``request``; otherwise who to ask."""
        async with self._pool.connection() as conn, conn.transaction():
            allowed = await oauth.get_consent(conn, user_id, request.client.client_id)
            if consent_given(request, allowed):
                return IssuedCode(await self._grants.issue_code(conn, request, user_id))
            user = await users.get_user(conn, user_id)
        return AskConsent(user.username if user is not None else str(user_id))

    async def allow(self, request: AuthorizationRequest, user_id: int) -> str:
        """Remember that ``user_id`` allowed ``request``'s scope, and issue its code."""
        async with self._pool.connection() as conn, conn.transaction():
            await oauth.upsert_consent(conn, user_id, request.client.client_id, request.scope)
            return await self._grants.issue_code(conn, request, user_id)
