"""Discovery documents and health."""

from __future__ import annotations

import falcon.testing
import pytest

from tests.api.conftest import PUBLIC_URL


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
)
async def test_protected_resource_metadata(client: falcon.testing.ASGIConductor, path: str) -> None:
    result = await client.simulate_get(path)
    assert result.status_code == 200
    assert result.json == {
        "resource": f"{PUBLIC_URL}/mcp",
        "authorization_servers": [PUBLIC_URL],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["memory:read", "memory:write"],
        "resource_name": "OwnSona",
    }
    assert result.headers["access-control-allow-origin"] == "*"


async def test_jwks_lists_the_signing_key(client: falcon.testing.ASGIConductor, keystore) -> None:
    result = await client.simulate_get("/oauth/jwks")
    assert result.status_code == 200
    keys = result.json["keys"]
    assert keys and keys[0]["kid"] == keystore.signing_key().kid
    assert all("d" not in key for key in keys)  # public parts only


async def test_healthz(client: falcon.testing.ASGIConductor) -> None:
    result = await client.simulate_get("/healthz")
    assert result.status_code == 200
    assert result.json == {"status": "ok"}
