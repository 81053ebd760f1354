"""Sample values for the pure OAuth tests: one registered client and its request."""

from __future__ import annotations

from datetime import UTC, datetime

from storage.oauth import ClientRow

# RFC 7636 Appendix B.
RFC_VERIFIER = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
RFC_CHALLENGE = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

REDIRECT = "https://claude.ai/api/mcp/auth_callback"
RESOURCE = "https://mem.example/mcp"
CLIENT = ClientRow(
    client_id="c1",
    client_secret_hash=None,
    client_name="Claude",
    redirect_uris=[REDIRECT],
    grant_types=["authorization_code", "refresh_token"],
    response_types=["code"],
    scope="memory:read memory:write",
    token_endpoint_auth_method="none",
    application_type=None,
    metadata={},
    created_at=datetime.now(UTC),
)


def authorization_params(**changes: str | None) -> list[tuple[str, str]]:
    """A valid authorization request of :data:`CLIENT`; a change of None drops the parameter."""
    base: dict[str, str | None] = {
        "response_type": "code",
        "client_id": "c1",
        "redirect_uri": REDIRECT,
        "state": "s",
        "code_challenge": RFC_CHALLENGE,
        "code_challenge_method": "S256",
    }
    base.update(changes)
    return [(k, v) for k, v in base.items() if v is not None]
