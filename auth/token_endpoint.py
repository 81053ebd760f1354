"""The token and revocation endpoints' use cases (OAuth 2.1 §3.2; RFC 7009 §2).

Each takes the parsed form and the ``Authorization`` header and either
answers or raises :class:`~auth.oauth_errors.OAuthError`; the HTTP layer
only reads the body and writes the reply. The checks run in the order the
errors are reported: the credentials' shape, the request's shape, the
client's proof, then the grant itself.
"""

from __future__ import annotations

from auth.clients import Clients, client_credentials
from auth.grants import Grants, TokenResponse, parse_token_request
from auth.oauth_errors import OAuthError
from storage.tokens import CLI_CLIENT_ID


async def exchange(
    clients: Clients, grants: Grants, form: dict[str, str], authorization: str | None
) -> TokenResponse:
    """``POST /oauth/token``: the tokens an authenticated client's grant earns."""
    creds = client_credentials(form, authorization)
    request = parse_token_request(form)
    client = await clients.authenticate(creds)
    return await grants.exchange(request, client)


async def revoke(
    clients: Clients, grants: Grants, form: dict[str, str], authorization: str | None
) -> None:
    """``POST /oauth/revoke``: revoke the token; unknown tokens are ignored (RFC 7009 §2.2)."""
    creds = client_credentials(form, authorization)
    token = form.get("token")
    # An `ownsona token` token belongs to no registered client, so it cannot
    # be authenticated as RFC 7009 §2.1 asks; the token proves itself instead
    # (a valid signature), and revoking only takes away what its holder could
    # do anyway.
    unauthenticated = creds.client_id in (None, CLI_CLIENT_ID) and creds.client_secret is None
    if unauthenticated and token and await grants.revoke_cli_token(token):
        return
    client = await clients.authenticate(creds)
    if not token:
        raise OAuthError("invalid_request", "token is required.")
    await grants.revoke(token, form.get("token_type_hint"), client)
