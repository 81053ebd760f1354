"""Discovery (RFC 8414, RFC 9728), registration (RFC 7591) and CORS on the OAuth endpoints."""

from __future__ import annotations

from typing import Any

import falcon.testing
import pytest

from api.app import create_app
from config.settings import Settings
from tests.auth.oauth_flow import count, oauth_clean, oauth_http, oauth_options

__all__ = ["oauth_clean", "oauth_http", "oauth_options"]


async def test_authorization_server_metadata(oauth_http: Any) -> None:
    result = await oauth_http.simulate_get("/.well-known/oauth-authorization-server")
    assert result.status_code == 200
    doc = result.json
    assert doc["issuer"] == "https://mem.example"  # byte for byte, no trailing slash
    assert doc["authorization_endpoint"] == "https://mem.example/oauth/authorize"
    assert doc["token_endpoint"] == "https://mem.example/oauth/token"
    assert doc["registration_endpoint"] == "https://mem.example/oauth/register"
    assert doc["revocation_endpoint"] == "https://mem.example/oauth/revoke"
    assert doc["code_challenge_methods_supported"] == ["S256"]
    assert doc["response_types_supported"] == ["code"]
    assert doc["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert doc["token_endpoint_auth_methods_supported"] == [
        "none",
        "client_secret_basic",
        "client_secret_post",
        "private_key_jwt",
    ]
    assert doc["token_endpoint_auth_signing_alg_values_supported"] == [
        "RS256",
        "PS256",
        "ES256",
        "Ed25519",
    ]
    assert doc["authorization_response_iss_parameter_supported"] is True
    assert doc["scopes_supported"] == ["memory:read", "memory:write"]
    # Claude uses metadata documents only when this and "none" above are both advertised.
    assert doc["client_id_metadata_document_supported"] is True
    assert result.headers["access-control-allow-origin"] == "*"


async def test_issuer_matches_protected_resource_metadata(oauth_http: Any) -> None:
    prm = (await oauth_http.simulate_get("/.well-known/oauth-protected-resource/mcp")).json
    asm = (await oauth_http.simulate_get("/.well-known/oauth-authorization-server")).json
    assert prm["authorization_servers"] == [asm["issuer"]]
    assert prm["resource"] == "https://mem.example/mcp"


async def test_trailing_slash_in_public_url_never_reaches_the_issuer() -> None:
    settings = Settings.from_env({"OWNSONA_PUBLIC_URL": "https://mem.example/"})
    assert settings.issuer == "https://mem.example"
    assert settings.resource_url == "https://mem.example/mcp"


async def test_401_challenge_names_metadata_and_scope(oauth_http: Any) -> None:
    result = await oauth_http.simulate_post(
        "/mcp", body=b"{}", headers={"Content-Type": "application/json"}
    )
    assert result.status_code == 401
    challenge = result.headers["www-authenticate"]
    assert (
        'resource_metadata="https://mem.example/.well-known/oauth-protected-resource"' in challenge
    )
    assert 'scope="memory:read memory:write"' in challenge


@pytest.mark.parametrize(
    "path",
    [
        "/oauth/token",
        "/oauth/register",
        "/oauth/revoke",
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource/mcp",
    ],
)
async def test_cors_preflight_for_browser_clients(oauth_http: Any, path: str) -> None:
    result = await oauth_http.simulate_options(
        path,
        headers={
            "Origin": "http://localhost:6274",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, mcp-protocol-version",
        },
    )
    assert result.status_code == 204
    assert result.headers["access-control-allow-origin"] == "*"
    assert "mcp-protocol-version" in result.headers["access-control-allow-headers"]


# --- what real clients send at registration ------------------------------------------


CLIENTS = {
    "claude.ai": {
        "client_name": "Claude",
        "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    },
    "claude.com": {
        "redirect_uris": ["https://claude.com/api/mcp/auth_callback"],
        "client_name": "Claude",
    },
    "claude code": {
        "client_name": "Claude Code (ownsona)",
        "redirect_uris": ["http://localhost:53127/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": "memory:read memory:write",
    },
    "chatgpt": {
        "client_name": "ChatGPT",
        "redirect_uris": ["https://chatgpt.com/connector_platform_oauth_redirect"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_post",
        "application_type": "web",
    },
    "inspector": {
        "redirect_uris": [
            "http://localhost:6274/oauth/callback",
            "http://localhost:6274/oauth/callback/debug",
        ],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "client_name": "MCP Inspector",
        "client_uri": "https://github.com/modelcontextprotocol/inspector",
    },
    "python sdk": {
        "redirect_uris": ["http://localhost:3030/callback"],
        "response_types": ["code"],
        "grant_types": ["authorization_code", "refresh_token"],
        "application_type": "native",
        "client_name": "ownsona-e2e",
        "scope": "memory:read memory:write unknown:scope",
    },
}


@pytest.mark.parametrize("name", sorted(CLIENTS))
async def test_real_client_registrations_are_accepted(oauth_http: Any, name: str) -> None:
    body = CLIENTS[name]
    result = await oauth_http.simulate_post("/oauth/register", json=body)
    assert result.status_code == 201, result.text
    info = result.json
    assert info["client_id"] and info["redirect_uris"] == body["redirect_uris"]
    method = body.get("token_endpoint_auth_method", "none")
    assert info["token_endpoint_auth_method"] == method
    assert ("client_secret" in info) == (method != "none")
    assert info["grant_types"] == ["authorization_code", "refresh_token"]
    assert info["scope"] == "memory:read memory:write"
    assert result.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({}, "invalid_redirect_uri"),
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://evil.example/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://a.example/cb#frag"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["/relative"]}, "invalid_redirect_uri"),
        (
            {"redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"]},
            "invalid_client_metadata",
        ),
        (
            {"redirect_uris": ["https://a.example/cb"], "response_types": ["token"]},
            "invalid_client_metadata",
        ),
        (
            {
                "redirect_uris": ["https://a.example/cb"],
                "token_endpoint_auth_method": "private_key_jwt",
            },
            "invalid_client_metadata",
        ),
        ([1, 2], "invalid_client_metadata"),
    ],
)
async def test_bad_registrations_are_refused(
    oauth_http: Any, oauth_clean: str, body: Any, error: str
) -> None:
    result = await oauth_http.simulate_post("/oauth/register", json=body)
    assert result.status_code == 400
    assert result.json["error"] == error and result.json["error_description"]
    assert count(oauth_clean, "oauth_clients") == 0


async def test_registration_can_be_switched_off(
    api_settings: Settings, runtime: Any, oauth_clean: str
) -> None:
    settings = api_settings.with_overrides(oauth_allow_dynamic_registration=False)
    app = create_app(settings, runtime=runtime)
    async with falcon.testing.ASGIConductor(app) as conductor:
        doc = (await conductor.simulate_get("/.well-known/oauth-authorization-server")).json
        assert "registration_endpoint" not in doc
        result = await conductor.simulate_post(
            "/oauth/register", json={"redirect_uris": ["https://claude.ai/api/mcp/auth_callback"]}
        )
    assert result.status_code == 403
    assert count(oauth_clean, "oauth_clients") == 0


async def test_token_endpoint_errors_are_rfc6749_json(oauth_http: Any) -> None:
    def form(body: str) -> dict[str, Any]:
        return {"body": body, "headers": {"Content-Type": "application/x-www-form-urlencoded"}}

    unsupported = await oauth_http.simulate_post(
        "/oauth/token", **form("grant_type=password&client_id=x")
    )
    assert unsupported.status_code == 400 and unsupported.json["error"] == "unsupported_grant_type"
    missing = await oauth_http.simulate_post("/oauth/token", **form("client_id=x"))
    assert missing.json["error"] == "invalid_request"
    repeated = await oauth_http.simulate_post("/oauth/token", **form("grant_type=a&grant_type=b"))
    assert repeated.json["error"] == "invalid_request"
    unknown = await oauth_http.simulate_post(
        "/oauth/token", **form("grant_type=authorization_code&code=x&client_id=nobody")
    )
    assert unknown.status_code == 401 and unknown.json["error"] == "invalid_client"
    assert unknown.headers["cache-control"] == "no-store"
    as_json = await oauth_http.simulate_post("/oauth/token", json={"grant_type": "refresh_token"})
    assert as_json.status_code == 400 and as_json.json["error"] == "invalid_request"


def test_allowed_origins_setting_feeds_the_origin_policy() -> None:
    from api.origins import OriginPolicy
    from config.settings import SettingsError

    settings = Settings.from_env(
        {
            "OWNSONA_PUBLIC_URL": "https://mem.example",
            "OWNSONA_ALLOWED_ORIGINS": "https://claude.ai, https://chatgpt.com/",
        }
    )
    assert settings.allowed_origins == ("https://claude.ai", "https://chatgpt.com")
    assert settings.secure_cookies
    policy = OriginPolicy(settings)
    assert policy.allows("https://chatgpt.com") and not policy.allows("https://evil.example")
    with pytest.raises(SettingsError, match="OWNSONA_ALLOWED_ORIGINS"):
        Settings.from_env({"OWNSONA_ALLOWED_ORIGINS": "https://a.example/path"})
    assert not Settings.from_env({}).secure_cookies
